// Learning-rate schedulers.
#pragma once

#include <cstdint>
#include <vector>

#include "ember/optim/optimizer.h"

namespace ember::optim {

/// torch.optim.lr_scheduler.StepLR: every `step_size` calls of step(), each group's
/// learning rate is multiplied by `gamma`. Construction counts as epoch 0.
class StepLR {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  void step();
  /// The learning rates set by the last step (or construction).
  std::vector<double> get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const noexcept { return last_epoch_; }

 private:
  Optimizer& optimizer_;
  int64_t step_size_;
  double gamma_;
  int64_t last_epoch_ = 0;
  std::vector<double> last_lr_;
};

}  // namespace ember::optim
