#include "ops/nn/reduction.h"

#include "ember/errors.h"
#include "ember/ops.h"

namespace ember::nn::detail {

Reduction parse_reduction(const std::string& reduction) {
  if (reduction == "none") return Reduction::None;
  if (reduction == "mean") return Reduction::Mean;
  if (reduction == "sum") return Reduction::Sum;
  ::ember::detail::fail<ValueError>(reduction, " is not a valid value for reduction");
}

Tensor reduce_loss(const Tensor& losses, Reduction reduction) {
  switch (reduction) {
    case Reduction::None: return losses;
    case Reduction::Mean: return losses.mean();
    case Reduction::Sum: return losses.sum();
  }
  return losses;
}

}  // namespace ember::nn::detail
