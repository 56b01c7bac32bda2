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
    if (entry.substr(0, prefix.size()) != prefix) break;  // anything else ends the list
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

std::vector<int> apply_visible_devices(const VisibleDevices& visible, int physical_count) {
  std::vector<int> devices;
  if (!visible.restricted || visible.uuid_list) {
    for (int i = 0; i < physical_count; ++i) devices.push_back(i);
    return devices;
  }
  for (int ordinal : visible.ordinals) {
    if (ordinal >= physical_count) break;
    devices.push_back(ordinal);
  }
  return devices;
}

}  // namespace ember::detail
