#include "ember/optim/lr_scheduler.h"

#include "ember/errors.h"

namespace ember::optim {

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : optimizer_(optimizer), step_size_(step_size), gamma_(gamma) {
  EMBER_CHECK(step_size > 0, ValueError, "StepLR: step_size must be positive, but got ", step_size);
  for (size_t g = 0; g < optimizer_.num_param_groups(); ++g) last_lr_.push_back(optimizer_.lr(g));
}

void StepLR::step() {
  // PyTorch's chainable form: multiply by gamma whenever the epoch reaches a multiple of step_size.
  ++last_epoch_;
  last_lr_.clear();
  for (size_t g = 0; g < optimizer_.num_param_groups(); ++g) {
    if (last_epoch_ % step_size_ == 0) optimizer_.set_lr(optimizer_.lr(g) * gamma_, g);
    last_lr_.push_back(optimizer_.lr(g));
  }
}

}  // namespace ember::optim
