// ember::save / ember::load: state dicts in the safetensors format.
//
// Note [safetensors layout]
// A file is: 8 bytes, the header length N as a little-endian uint64; N bytes of JSON
// (an object: "__metadata__" -> {string: string}, and per tensor name -> {"dtype",
// "shape", "data_offsets": [begin, end]}, offsets relative to the end of the header);
// then the data, each tensor row-major and little-endian, with no gaps and nothing
// after the last tensor. The header is padded with spaces to a multiple of 8 bytes so
// the data is aligned (as the reference writer does). The loader checks what the
// reference reader checks (header no longer than 100,000,000 bytes, offsets contiguous
// from 0 and covering the data exactly, byte counts matching shape and dtype) and
// reads every tensor before it returns anything. complex128 has no code in the format:
// it is written as F64 with a trailing dimension of 2 and its name is listed in the
// metadata entry "ember.complex128" (a JSON array of names); load restores it.
//
// A header is untrusted input (Note [untrusted JSON]): its nesting is bounded before it is
// parsed, after its JSON object only whitespace may follow (the reference reader's rule;
// NUL padding is refused), and errors quote only short excerpts of it. The file is read
// with positioned reads (nn/checkpoint_file.h): load_metadata reads the header alone, load
// one tensor at a time straight into its storage. Every error names the file.
#include "ember/serialize.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "core/tensor_impl.h"
#include "ember/errors.h"
#include "nn/checkpoint_file.h"
#include "nn/untrusted_text.h"

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace ember {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kComplex128Key = "ember.complex128";

const char* dtype_code(DType dtype) {
  switch (dtype) {
    case kBool: return "BOOL";
    case kUInt8: return "U8";
    case kInt8: return "I8";
    case kInt16: return "I16";
    case kInt32: return "I32";
    case kInt64: return "I64";
    case kFloat16: return "F16";
    case kBFloat16: return "BF16";
    case kFloat32: return "F32";
    case kFloat64: return "F64";
    case kComplex64: return "C64";
    case kComplex128: return "F64";  // with a trailing dimension of 2 (the file comment)
  }
  return "";
}

std::optional<DType> dtype_from_code(const std::string& code) {
  static const std::pair<const char*, DType> kCodes[] = {
      {"BOOL", kBool},   {"U8", kUInt8},      {"I8", kInt8},     {"I16", kInt16},   {"I32", kInt32},    {"I64", kInt64},
      {"F16", kFloat16}, {"BF16", kBFloat16}, {"F32", kFloat32}, {"F64", kFloat64}, {"C64", kComplex64}};
  for (const auto& [name, dtype] : kCodes) {
    if (code == name) return dtype;
  }
  return std::nullopt;
}

template <typename... Args>
[[noreturn]] void corrupt(const std::string& path, const Args&... args) {
  detail::fail<ValueError>("ember::load: '", path, "' is not a valid safetensors file: ", args...);
}

// Parses JSON text read from the file `path` (Note [untrusted JSON]). `what` names the text
// in messages; after the top-level value only JSON whitespace may follow, as serde_json
// (the reference reader) allows.
nlohmann::json parse_untrusted(const std::string& text, const std::string& path, const std::string& what) {
  const detail::JsonExtent extent = detail::json_extent(text);
  if (extent.too_deep) corrupt(path, what, " nests deeper than ", detail::kMaxJsonDepth, " levels");
  if (extent.end) {
    const size_t pad = text.find_first_not_of(" \t\n\r", *extent.end);
    if (pad != std::string::npos)
      corrupt(path, what, " has the byte ", detail::excerpt(text.substr(pad, 1)), " at offset ", pad,
              " after its JSON value (only whitespace may pad it)");
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& err) {
    corrupt(path, what, " is not valid JSON (", detail::excerpt(err.what(), 160), ")");
  }
}

// One tensor entry of a header, checked against the data size.
struct Entry {
  std::string name;
  DType dtype;
  IntList shape;  // as stored (complex128: with the trailing 2)
  uint64_t begin, end;
};

IntList parse_shape(const nlohmann::json& value, const std::string& path, const std::string& name) {
  if (!value.is_array()) corrupt(path, "tensor ", detail::excerpt(name), " has no \"shape\" list");
  IntList shape;
  for (const auto& dim : value) {
    if (!dim.is_number_unsigned() || dim.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      corrupt(path, "tensor ", detail::excerpt(name), " has an invalid shape: dimension ", detail::excerpt(dim.dump()));
    shape.push_back(dim.get<int64_t>());
  }
  return shape;
}

Entry parse_entry(const std::string& name, const nlohmann::json& info, const std::string& path, uint64_t data_bytes) {
  if (!info.is_object()) corrupt(path, "the header entry of tensor ", detail::excerpt(name), " is not an object");
  auto dtype_it = info.find("dtype");
  if (dtype_it == info.end() || !dtype_it->is_string())
    corrupt(path, "tensor ", detail::excerpt(name), " has no \"dtype\"");
  std::optional<DType> dtype = dtype_from_code(dtype_it->get<std::string>());
  if (!dtype)
    corrupt(path, "tensor ", detail::excerpt(name), " has unsupported dtype ",
            detail::excerpt(dtype_it->get<std::string>()));
  auto shape_it = info.find("shape");
  if (shape_it == info.end()) corrupt(path, "tensor ", detail::excerpt(name), " has no \"shape\" list");
  IntList shape = parse_shape(*shape_it, path, name);
  auto offsets_it = info.find("data_offsets");
  if (offsets_it == info.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned())
    corrupt(path, "tensor ", detail::excerpt(name), " has no valid \"data_offsets\" pair");
  const uint64_t begin = (*offsets_it)[0].get<uint64_t>(), end = (*offsets_it)[1].get<uint64_t>();
  if (begin > end || end > data_bytes)
    corrupt(path, "tensor ", detail::excerpt(name), " has data offsets [", begin, ", ", end, "] outside the ",
            data_bytes, " bytes of data (the file may be truncated)");
  // Byte count from the shape, without overflow.
  uint64_t expected = element_size(*dtype);
  for (int64_t dim : shape) {
    if (dim != 0 && expected > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(dim))
      corrupt(path, "tensor ", detail::excerpt(name), " has a shape too large for its data");
    expected *= static_cast<uint64_t>(dim);
  }
  if (expected != end - begin)
    corrupt(path, "tensor ", detail::excerpt(name), " of dtype ", dtype_code(*dtype), " and shape ",
            detail::excerpt(shape_it->dump()), " needs ", expected, " bytes but its data offsets span ", end - begin);
  return Entry{name, *dtype, std::move(shape), begin, end};
}

// The parsed header of a file.
struct Header {
  std::vector<Entry> entries;  // sorted by data offset
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;
};

Header read_header(const detail::CheckpointReader& file, const std::string& path) {
  const uint64_t file_bytes = file.size();
  if (file_bytes < 8) corrupt(path, "the file has ", file_bytes, " bytes, fewer than the 8-byte header length");
  unsigned char length_bytes[8];
  if (!file.read_at(length_bytes, 8, 0)) corrupt(path, "cannot read the header length (the file is truncated)");
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | length_bytes[i];
  if (header_bytes > kMaxHeaderBytes)
    corrupt(path, "the header length ", header_bytes, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  if (header_bytes > file_bytes - 8)
    corrupt(path, "the header length is ", header_bytes, " bytes but only ", file_bytes - 8,
            " bytes follow (the file is truncated)");
  std::string text(header_bytes, '\0');
  if (!file.read_at(text.data(), header_bytes, 8)) corrupt(path, "cannot read the header (the file is truncated)");
  if (text.empty() || text.front() != '{') corrupt(path, "the header is not a JSON object");
  const nlohmann::json json = parse_untrusted(text, path, "the header");
  if (!json.is_object()) corrupt(path, "the header is not a JSON object");

  Header header;
  header.data_start = 8 + header_bytes;
  const uint64_t data_bytes = file_bytes - header.data_start;
  for (const auto& [name, info] : json.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) corrupt(path, "\"__metadata__\" is not an object");
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string()) corrupt(path, "metadata entry ", detail::excerpt(key), " is not a string");
        header.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    header.entries.push_back(parse_entry(name, info, path, data_bytes));
  }
  std::sort(header.entries.begin(), header.entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin < b.begin || (a.begin == b.begin && a.end < b.end); });
  uint64_t expected_begin = 0;
  for (const Entry& entry : header.entries) {
    if (entry.begin != expected_begin)
      corrupt(path, "tensor ", detail::excerpt(entry.name), " starts at data offset ", entry.begin, ", expected ",
              expected_begin, " (tensors must cover the data without gaps or overlaps)");
    expected_begin = entry.end;
  }
  if (expected_begin != data_bytes)
    corrupt(path, "the tensors cover ", expected_begin, " bytes of data but the file holds ", data_bytes);
  return header;
}

std::set<std::string> complex128_names(const Header& header, const std::string& path) {
  std::set<std::string> names;
  auto found = header.metadata.find(kComplex128Key);
  if (found == header.metadata.end()) return names;
  const std::string what = detail::cat("metadata entry '", kComplex128Key, "'");
  const nlohmann::json list = parse_untrusted(found->second, path, what);
  if (!list.is_array()) corrupt(path, what, " is not a JSON list");
  for (const auto& name : list) {
    if (!name.is_string()) corrupt(path, what, " lists a non-string");
    names.insert(name.get<std::string>());
  }
  return names;
}

// Runs `allocate` (a host tensor or a copy to the device) for tensor `name` of the file
// `path`; running out of memory there is an OutOfMemoryError that names both.
template <typename F>
Tensor allocating(const std::string& path, const std::string& name, F&& allocate) {
  try {
    return allocate();
  } catch (const OutOfMemoryError& err) {
    detail::fail<OutOfMemoryError>("ember::load: '", path, "': not enough memory for tensor ", detail::excerpt(name),
                                   ": ", err.what());
  }
}

void check_utf8(const std::string& text, const char* what) {
  EMBER_CHECK(detail::is_valid_utf8(text), ValueError, "ember::save: ", what, " ", detail::excerpt(text),
              " is not valid UTF-8 (a safetensors header is JSON text)");
}

}  // namespace

void save(const nn::StateDict& tensors, const std::string& path, const std::map<std::string, std::string>& metadata) {
  EMBER_CHECK(metadata.count(kComplex128Key) == 0, ValueError, "ember::save: metadata key '", kComplex128Key,
              "' is reserved");
  for (const auto& [key, value] : metadata) {
    check_utf8(key, "metadata key");
    check_utf8(value, "metadata value");
  }
  // Host copies first: nothing is written unless every tensor can be read.
  std::vector<Tensor> host;
  host.reserve(tensors.size());
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  nlohmann::json complex128 = nlohmann::json::array();
  for (const auto& [name, tensor] : tensors) {
    EMBER_CHECK(tensor.defined(), ValueError, "ember::save: tensor ", detail::excerpt(name), " is undefined");
    EMBER_CHECK(name != "__metadata__", ValueError, "ember::save: '__metadata__' is reserved and cannot name a tensor");
    check_utf8(name, "tensor name");
    Tensor t = tensor.is_cpu() ? tensor.contiguous() : tensor.to(Device(kCPU)).contiguous();
    if (t.dtype() == kComplex128) complex128.push_back(name);
    host.push_back(std::move(t));
  }
  if (!metadata.empty() || !complex128.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    if (!complex128.empty()) meta[kComplex128Key] = complex128.dump();
    header["__metadata__"] = std::move(meta);
  }
  uint64_t offset = 0;
  size_t i = 0;
  for (const auto& [name, tensor] : tensors) {
    const Tensor& t = host[i++];
    nlohmann::ordered_json shape = nlohmann::ordered_json::array();
    for (int64_t dim : t.sizes()) shape.push_back(dim);
    if (t.dtype() == kComplex128) shape.push_back(2);
    const uint64_t bytes = t.nbytes();
    header[name] = {{"dtype", dtype_code(t.dtype())}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();  // cannot throw: every string was checked above
  text.append((8 - text.size() % 8) % 8, ' ');

  detail::AtomicFileWriter out(path, "ember::save");
  unsigned char length_bytes[8];
  for (int b = 0; b < 8; ++b) length_bytes[b] = static_cast<unsigned char>(uint64_t(text.size()) >> (8 * b));
  out.write(length_bytes, 8);
  out.write(text.data(), text.size());
  for (const Tensor& t : host) {
    if (t.nbytes() > 0) out.write(t.data_ptr(), t.nbytes());
  }
  out.commit();
}

nn::StateDict load(const std::string& path, Device device) {
  const detail::CheckpointReader file(path, "ember::load");
  const Header header = read_header(file, path);
  const std::set<std::string> complex128 = complex128_names(header, path);

  std::vector<Tensor> host;
  host.reserve(header.entries.size());
  for (const Entry& entry : header.entries) {
    DType dtype = entry.dtype;
    IntList shape = entry.shape;
    if (complex128.count(entry.name)) {
      if (dtype != kFloat64 || shape.empty() || shape.back() != 2)
        corrupt(path, "tensor ", detail::excerpt(entry.name),
                " is marked complex128 but is not F64 with a trailing dimension of 2");
      dtype = kComplex128;
      shape.pop_back();
    }
    Tensor t = allocating(path, entry.name, [&] { return detail::make_tensor(shape, dtype, Device(kCPU)); });
    if (t.nbytes() > 0 && !file.read_at(t.data_ptr(), t.nbytes(), header.data_start + entry.begin))
      corrupt(path, "cannot read the data of tensor ", detail::excerpt(entry.name), " (the file is truncated)");
    if (dtype == kBool) {
      const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
      if (std::any_of(bytes, bytes + t.nbytes(), [](unsigned char b) { return b > 1; }))
        corrupt(path, "BOOL tensor ", detail::excerpt(entry.name), " holds bytes other than 0 and 1");
    }
    host.push_back(std::move(t));
  }
  for (const std::string& name : complex128) {
    bool present =
        std::any_of(header.entries.begin(), header.entries.end(), [&](const Entry& e) { return e.name == name; });
    if (!present) corrupt(path, "metadata entry '", kComplex128Key, "' names a missing tensor ", detail::excerpt(name));
  }

  // Moving to the device last: a failure there also returns nothing.
  nn::StateDict out;
  for (size_t i = 0; i < host.size(); ++i) {
    const std::string& name = header.entries[i].name;
    out.insert(name, device.is_cpu() ? host[i] : allocating(path, name, [&] { return host[i].to(device); }));
  }
  return out;
}

std::map<std::string, std::string> load_metadata(const std::string& path) {
  const detail::CheckpointReader file(path, "ember::load_metadata");
  return read_header(file, path).metadata;
}

}  // namespace ember
