// Device parsing and printing, following c10::Device so that strings users
// write for PyTorch mean the same thing here and bad ones fail the same way.
#include "ember/device.h"

#include <cstdint>
#include <limits>
#include <ostream>

#include "ember/errors.h"

namespace ember {
namespace {

bool is_name_char(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_'; }
bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

DeviceType parse_type(std::string_view name) {
  if (name == "cpu") return kCPU;
  if (name == "cuda") return kCUDA;
  detail::fail<ValueError>("Expected one of cpu, cuda device type at start of device string: ", name);
}

// Range checks shared by both constructors (c10::Device::validate).
void validate(DeviceType type, int index) {
  EMBER_CHECK(index >= -1, ValueError, "Device index must be -1 or non-negative, got ", index);
  EMBER_CHECK(type != kCPU || index <= 0, ValueError, "CPU device index must be -1 or zero, got ", index);
  EMBER_CHECK(index <= std::numeric_limits<int16_t>::max(), ValueError, "Device index ", index,
              " is too large (at most ", std::numeric_limits<int16_t>::max(), ")");
}

}  // namespace

Device::Device(DeviceType type, int index) : type_(type), index_(-1) {
  validate(type, index);
  index_ = static_cast<int16_t>(index);
}

// Matches the grammar ([a-zA-Z_]+)(?::([1-9]\d*|0))? exactly, as c10 does: no
// spaces, no sign, no leading zeros, nothing after the index. The name is
// checked against the known types only after the shape is valid, so "gpu:0"
// reports the unknown type and "cuda:01" reports the whole string.
Device::Device(std::string_view text) : type_(kCPU), index_(-1) {
  EMBER_CHECK(!text.empty(), ValueError, "Device string must not be empty");
  size_t colon = text.find(':');
  std::string_view name = text.substr(0, colon);
  bool valid = !name.empty();
  for (char ch : name) valid = valid && is_name_char(ch);
  std::string_view digits;
  if (colon != std::string_view::npos) {
    digits = text.substr(colon + 1);
    valid = valid && !digits.empty() && (digits.size() == 1 || digits[0] != '0');
    for (char ch : digits) valid = valid && is_digit(ch);
  }
  EMBER_CHECK(valid, ValueError, "Invalid device string: '", text, "'");

  int index = -1;
  if (!digits.empty()) {
    // Parse with an overflow guard; c10 reports std::stoi's failure this way.
    int64_t value = 0;
    for (char ch : digits) {
      value = value * 10 + (ch - '0');
      EMBER_CHECK(value <= std::numeric_limits<int16_t>::max(), ValueError, "Could not parse device index '", digits,
                  "' in device string '", text, "'");
    }
    index = static_cast<int>(value);
  }
  DeviceType type = parse_type(name);
  validate(type, index);
  type_ = type;
  index_ = static_cast<int16_t>(index);
}

std::string Device::str() const {
  std::string out = type_ == kCUDA ? "cuda" : "cpu";
  if (has_index()) out += ":" + std::to_string(index_);
  return out;
}

std::string Device::repr() const {
  std::string out = "device(type='";
  out += type_ == kCUDA ? "cuda" : "cpu";
  out += "'";
  if (has_index()) out += ", index=" + std::to_string(index_);
  return out + ")";
}

std::ostream& operator<<(std::ostream& out, const Device& device) { return out << device.str(); }

// Lower case, as Python's device.type; c10 prints "CUDA" but users of this
// API compare against the Python spelling.
std::ostream& operator<<(std::ostream& out, DeviceType type) { return out << (type == kCUDA ? "cuda" : "cpu"); }

}  // namespace ember
