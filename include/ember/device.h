// Device: a (type, index) pair parsed and printed as PyTorch does.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

namespace ember {

enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };
inline constexpr DeviceType kCPU = DeviceType::CPU;
inline constexpr DeviceType kCUDA = DeviceType::CUDA;

class Device {
 public:
  /// A device of `type`; index -1 means "none given" (the current device for cuda).
  Device(DeviceType type, int index = -1);  // NOLINT: implicit like torch.device
  /// Parses "cpu", "cuda", "cuda:1" with PyTorch's rules; bad strings throw ValueError.
  Device(std::string_view text);                                       // NOLINT
  Device(const std::string& text) : Device(std::string_view(text)) {}  // NOLINT
  Device(const char* text) : Device(std::string_view(text)) {}         // NOLINT

  DeviceType type() const noexcept { return type_; }
  int index() const noexcept { return index_; }
  bool has_index() const noexcept { return index_ >= 0; }
  bool is_cuda() const noexcept { return type_ == kCUDA; }
  bool is_cpu() const noexcept { return type_ == kCPU; }

  std::string str() const;   // "cuda:1", "cuda", "cpu"
  std::string repr() const;  // "device(type='cuda', index=1)"

  friend bool operator==(const Device&, const Device&) = default;

 private:
  DeviceType type_;
  int16_t index_;
};

std::ostream& operator<<(std::ostream& out, const Device& device);
std::ostream& operator<<(std::ostream& out, DeviceType type);

}  // namespace ember

template <>
struct std::hash<ember::Device> {
  size_t operator()(const ember::Device& d) const noexcept {
    return std::hash<int>()(static_cast<int>(d.type()) << 16 | (d.index() & 0xffff));
  }
};
