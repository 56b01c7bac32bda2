#include "runtime/visible_devices.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

namespace ember::detail {
namespace {

std::string_view strip(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_commas(std::string_view s) {
  std::vector<std::string_view> parts;
  for (;;) {
    size_t comma = s.find(',');
    parts.push_back(s.substr(0, comma));
    if (comma == std::string_view::npos) return parts;
    s.remove_prefix(comma + 1);
  }
}

// The integer `entry` starts with, as strtol reads it; nullopt when it starts with none.
// Values too large for an int are treated as "no such device" (INT32_MAX).
std::optional<int64_t> leading_integer(std::string_view entry) {
  size_t i = 0;
  bool negative = false;
  if (i < entry.size() && (entry[i] == '+' || entry[i] == '-')) negative = entry[i++] == '-';
  size_t digits_start = i;
  int64_t value = 0;
  while (i < entry.size() && std::isdigit(static_cast<unsigned char>(entry[i]))) {
    value = std::min<int64_t>(value * 10 + (entry[i] - '0'), INT32_MAX);
    ++i;
  }
  if (i == digits_start) return std::nullopt;
  return negative ? -value : value;
}

std::vector<std::string> parse_uuid_list(std::string_view value, std::string_view prefix) {
  std::vector<std::string> uuids;
  for (std::string_view raw : split_commas(value)) {
    std::string_view entry = strip(raw);
    if (std::find(uuids.begin(), uuids.end(), entry) != uuids.end()) return {};  // repeated: empty set
    if (entry.substr(0, prefix.size()) != prefix) break;                         // anything else ends the list
    uuids.emplace_back(entry);
  }
  return uuids;
}

}  // namespace

VisibleDevices parse_visible_devices(std::optional<std::string_view> value) {
  VisibleDevices visible;
  if (!value) return visible;
  visible.restricted = true;
  std::string_view text = strip(*value);
  for (std::string_view prefix : {std::string_view("GPU-"), std::string_view("MIG-")}) {
    if (text.substr(0, prefix.size()) == prefix) {
      visible.uuid_list = true;
      visible.uuids = parse_uuid_list(text, prefix);
      return visible;
    }
  }
  for (std::string_view raw : split_commas(text)) {
    std::optional<int64_t> ordinal = leading_integer(strip(raw));
    if (!ordinal || *ordinal < 0) break;
    int device = static_cast<int>(*ordinal);
    if (std::find(visible.ordinals.begin(), visible.ordinals.end(), device) != visible.ordinals.end()) {
      visible.ordinals.clear();
      return visible;
    }
    visible.ordinals.push_back(device);
  }
  return visible;
}

std::string format_uuid(const unsigned char (&bytes)[16]) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 15];
  }
  return out;
}

std::string emulated_device_uuid(int physical) {
  // Two splitmix64 outputs keyed by the device number, shaped as a version-4 UUID.
  auto mix = [](uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  uint64_t key = 0x656D626572000000ull ^ static_cast<uint64_t>(physical);  // "ember"
  uint64_t words[2] = {mix(key), mix(key ^ 0xFFFFFFFF00000000ull)};
  unsigned char bytes[16];
  for (int i = 0; i < 16; ++i) bytes[i] = static_cast<unsigned char>(words[i / 8] >> (8 * (i % 8)));
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0F) | 0x40);
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3F) | 0x80);
  return format_uuid(bytes);
}

std::vector<int> apply_visible_devices(const VisibleDevices& visible, int physical_count) {
  std::vector<int> devices;
  if (!visible.restricted) {
    for (int i = 0; i < physical_count; ++i) devices.push_back(i);
    return devices;
  }
  if (visible.uuid_list) {
    for (const std::string& entry : visible.uuids) {
      int match = -1;
      bool ambiguous = false;
      for (int i = 0; i < physical_count; ++i) {
        if (("GPU-" + emulated_device_uuid(i)).starts_with(entry)) {
          ambiguous |= match >= 0;
          match = i;
        }
      }
      if (match < 0 || ambiguous) break;  // the first entry naming no single device ends the list
      if (std::find(devices.begin(), devices.end(), match) != devices.end()) return {};
      devices.push_back(match);
    }
    return devices;
  }
  for (int ordinal : visible.ordinals) {
    if (ordinal >= physical_count) break;
    devices.push_back(ordinal);
  }
  return devices;
}

}  // namespace ember::detail
