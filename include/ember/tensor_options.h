// TensorOptions: dtype, device and pinning of a new tensor.
#pragma once

#include <optional>

#include "ember/device.h"
#include "ember/dtype.h"

namespace ember {

class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(DType dtype) : dtype_(dtype) {}                          // NOLINT: implicit by design (api.md)
  TensorOptions(Device device) : device_(device) {}                      // NOLINT
  TensorOptions(DeviceType type) : device_(Device(type)) {}              // NOLINT
  TensorOptions(const char* device) : device_(Device(device)) {}         // NOLINT
  TensorOptions(const std::string& device) : device_(Device(device)) {}  // NOLINT

  TensorOptions dtype(DType d) const {
    auto o = *this;
    o.dtype_ = d;
    return o;
  }
  TensorOptions device(Device d) const {
    auto o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions pinned_memory(bool p) const {
    auto o = *this;
    o.pinned_ = p;
    return o;
  }
  /// Factories make a leaf that requires grad (float and complex dtypes only).
  TensorOptions requires_grad(bool r) const {
    auto o = *this;
    o.requires_grad_ = r;
    return o;
  }

  /// The dtype, or the default dtype when none was set.
  DType dtype() const noexcept { return dtype_.value_or(default_dtype()); }
  /// The device, or cpu when none was set. Not resolved: "cuda" keeps index -1.
  Device device() const noexcept { return device_.value_or(Device(kCPU)); }
  bool pinned_memory() const noexcept { return pinned_; }
  bool requires_grad() const noexcept { return requires_grad_; }
  bool has_dtype() const noexcept { return dtype_.has_value(); }
  bool has_device() const noexcept { return device_.has_value(); }

 private:
  std::optional<DType> dtype_;
  std::optional<Device> device_;
  bool pinned_ = false;
  bool requires_grad_ = false;
};

}  // namespace ember
