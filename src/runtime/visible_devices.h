// CUDA_VISIBLE_DEVICES: which physical devices a process sees, and in which order.
//
// Parsing follows PyTorch's torch.cuda._parse_visible_devices, which mirrors what the
// CUDA runtime does: entries are comma-separated and whitespace-stripped; each entry is
// read as the integer it starts with (an optional sign, then digits: "1gpu2" is 1, "+3"
// is 3, "-0" is 0); the first entry that is not an integer, or is negative, ends the
// list; a repeated entry makes the whole list empty. A list starting with "GPU-" or
// "MIG-" is a list of UUIDs (prefix-matched by the driver). Applying an ordinal list to
// a machine drops everything from the first ordinal that does not exist.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::detail {

struct VisibleDevices {
  /// False when the variable is unset: every device is visible.
  bool restricted = false;
  /// Ordinals, in order (when the list is not a UUID list).
  std::vector<int> ordinals;
  /// True for a "GPU-..." / "MIG-..." list; `uuids` holds its entries in order (only the
  /// driver can resolve them).
  bool uuid_list = false;
  std::vector<std::string> uuids;
};

/// Parses a CUDA_VISIBLE_DEVICES value; `value` empty optional means unset.
VisibleDevices parse_visible_devices(std::optional<std::string_view> value);

/// The physical devices, in visible order, out of `physical_count` that `visible` exposes.
/// Ordinals past the physical count end the list (CUDA's behaviour). UUID lists name no
/// emulated device: emulated devices have no UUIDs, so such a list is ignored and every
/// device stays visible (the variable is meant for the GPUs of the machine).
std::vector<int> apply_visible_devices(const VisibleDevices& visible, int physical_count);

}  // namespace ember::detail
