// The found-inf flags of the optimizer step a GradScaler is taking on the device (Note [Scaler
// steps on the device] in grad_scaler.cpp): fused_step appends its group's device's flag to
// the launch, which then skips itself where the flag is not 0, and Optimizer::step takes
// the device step counts back by the flag.
#pragma once

#include <utility>
#include <vector>

#include "ember/device.h"
#include "ember/tensor.h"

namespace ember::detail::optim {

/// Per device, a float32 {1} tensor: 1 to skip the step, 0 to take it.
using FoundInfFlags = std::vector<std::pair<Device, Tensor>>;

/// This thread's flags while a GradScaler's device-side step runs, else nullptr.
const FoundInfFlags* amp_found_inf() noexcept;
/// The flag of `device` among the current ones (an undefined tensor if none).
Tensor amp_found_inf_on(Device device);

/// Makes `flags` current for the optimizer step taken while it lives.
class AmpFoundInfScope {
 public:
  explicit AmpFoundInfScope(FoundInfFlags flags);
  ~AmpFoundInfScope();
  AmpFoundInfScope(const AmpFoundInfScope&) = delete;
  AmpFoundInfScope& operator=(const AmpFoundInfScope&) = delete;

 private:
  FoundInfFlags flags_;
  const FoundInfFlags* previous_;
};

}  // namespace ember::detail::optim
