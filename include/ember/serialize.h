// Checkpoints: state dicts saved and loaded in the safetensors format.
#pragma once

#include <map>
#include <string>

#include "ember/nn/state_dict.h"

namespace ember {

/// Writes `tensors` to `path` in the safetensors format (an 8-byte little-endian header
/// length, a JSON header, then the raw little-endian data of each tensor in order).
/// cuda tensors are copied to the host first; non-contiguous tensors are written in
/// row-major order. complex128, which has no safetensors code, is stored as F64 with a
/// trailing dimension of 2 and listed under "ember.complex128" in "__metadata__".
/// `metadata` adds string entries to "__metadata__"; names and metadata must be valid
/// UTF-8 (a ValueError otherwise). The file is written under a unique temporary name
/// beside `path` and renamed over it when complete, so a failed save leaves no partial
/// checkpoint and concurrent saves to one path each replace it whole (the last wins).
/// A symbolic link at `path` is written through, as torch.save does: the link stays.
void save(const nn::StateDict& tensors, const std::string& path,
          const std::map<std::string, std::string>& metadata = {});

/// Reads a safetensors file into a state dict (in the order of the tensors' data in the
/// file, which is the saved order for ember's files) on `device`. A missing, truncated,
/// oversized-header or otherwise corrupt file is a ValueError naming the file (headers
/// nested deeper than 128 levels included), running out of memory an OutOfMemoryError
/// naming it; nothing is returned then. Tensors are read one at a time into their storage.
nn::StateDict load(const std::string& path, Device device = Device(kCPU));

/// The "__metadata__" entries of a safetensors file (ember's own "ember." keys included).
/// Reads the header only, so a file larger than memory can be inspected.
std::map<std::string, std::string> load_metadata(const std::string& path);

}  // namespace ember
