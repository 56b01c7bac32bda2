#include "ember/nn/modules/batchnorm.h"

#include "ember/autograd.h"
#include "ember/factories.h"
#include "ember/nn.h"
#include "ember/nn/init.h"
#include "nn/copy_module.h"
#include "nn/module_context.h"
#include "nn/python_repr.h"

namespace ember::nn {

BatchNorm::BatchNorm(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                     bool track_running_stats)
    : num_features(num_features),
      eps(eps),
      momentum(momentum),
      affine(affine),
      track_running_stats(track_running_stats) {
  weight = register_parameter("weight", affine ? empty({num_features}) : Tensor());
  bias = register_parameter("bias", affine ? empty({num_features}) : Tensor());
  running_mean = register_buffer("running_mean", track_running_stats ? zeros({num_features}) : Tensor());
  running_var = register_buffer("running_var", track_running_stats ? ones({num_features}) : Tensor());
  num_batches_tracked = register_buffer("num_batches_tracked", track_running_stats ? zeros({}, kInt64) : Tensor());
  reset_parameters();
}

void BatchNorm::reset_running_stats() {
  if (!track_running_stats) return;
  init::zeros_(running_mean);
  init::ones_(running_var);
  init::zeros_(num_batches_tracked);
}

void BatchNorm::reset_parameters() {
  reset_running_stats();
  if (affine) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

Tensor BatchNorm::forward(const Tensor& input) {
  return detail::nn::with_module_context(*this, [&] {
    check_input_dim(input);
    // PyTorch's _BatchNorm.forward.
    double factor = momentum.value_or(0.0);
    if (is_training() && track_running_stats) {
      {
        NoGradGuard no_grad;
        num_batches_tracked += 1;
      }
      if (!momentum) factor = 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
    }
    const bool use_batch_stats = is_training() || !running_mean.defined();
    const bool update_stats = !is_training() || track_running_stats;
    return functional::batch_norm(input, update_stats ? running_mean : Tensor(), update_stats ? running_var : Tensor(),
                                  weight, bias, use_batch_stats, factor, eps);
  });
}

std::string BatchNorm::extra_repr() const {
  return detail::cat(num_features, ", eps=", detail::python_float(eps),
                     ", momentum=", momentum ? detail::python_float(*momentum) : std::string("None"),
                     ", affine=", detail::python_bool(affine),
                     ", track_running_stats=", detail::python_bool(track_running_stats));
}

void BatchNorm1d::check_input_dim(const Tensor& input) const {
  EMBER_CHECK(input.dim() == 2 || input.dim() == 3, ValueError, "expected 2D or 3D input (got ", input.dim(),
              "D input)");
}

std::shared_ptr<Module> BatchNorm1d::clone() const {
  return detail::nn::clone_as(
      *this, [&] { return std::make_shared<BatchNorm1d>(num_features, eps, momentum, affine, track_running_stats); });
}

void BatchNorm2d::check_input_dim(const Tensor& input) const {
  EMBER_CHECK(input.dim() == 4, ValueError, "expected 4D input (got ", input.dim(), "D input)");
}

std::shared_ptr<Module> BatchNorm2d::clone() const {
  return detail::nn::clone_as(
      *this, [&] { return std::make_shared<BatchNorm2d>(num_features, eps, momentum, affine, track_running_stats); });
}

void BatchNorm::rebind_members(const MemberRemap& remap) {
  remap(weight);
  remap(bias);
  remap(running_mean);
  remap(running_var);
  remap(num_batches_tracked);
}

}  // namespace ember::nn
