#include "ember/optim/adam.h"

#include <cmath>

#include "ember/errors.h"
#include "ember/factories.h"
#include "nn/python_repr.h"
#include "optim/fused_step.h"

namespace ember::optim {
namespace {

void check_options(const AdamOptions& o) {
  using detail::python_float;
  // PyTorch refuses lr < 0 (and NaN); inf too here, which one step turns the parameters into.
  EMBER_CHECK(o.lr() >= 0.0 && std::isfinite(o.lr()), ValueError, "Invalid learning rate: ", python_float(o.lr()));
  EMBER_CHECK(o.eps() >= 0.0, ValueError, "Invalid epsilon value: ", python_float(o.eps()));
  EMBER_CHECK(o.betas().first >= 0.0 && o.betas().first < 1.0, ValueError,
              "Invalid beta parameter at index 0: ", python_float(o.betas().first));
  EMBER_CHECK(o.betas().second >= 0.0 && o.betas().second < 1.0, ValueError,
              "Invalid beta parameter at index 1: ", python_float(o.betas().second));
  EMBER_CHECK(o.weight_decay() >= 0.0, ValueError, "Invalid weight_decay value: ", python_float(o.weight_decay()));
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options) { add_param_group(std::move(params), options); }

void Adam::add_param_group(std::vector<Tensor> params, AdamOptions options) {
  check_options(options);
  add_group(std::move(params));
  options_.push_back(options);
}

void Adam::check_group(size_t group) const { check_options(options_.at(group)); }

void Adam::update(size_t group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  const AdamOptions& o = options_[group];  // checked by check_group
  detail::StepHyper hyper;
  hyper.rule = detail::UpdateRule::Adam;
  hyper.lr = o.lr();
  hyper.weight_decay = o.weight_decay();
  hyper.beta1 = o.betas().first;
  hyper.beta2 = o.betas().second;
  hyper.eps = o.eps();
  hyper.maximize = o.maximize();
  hyper.decoupled_weight_decay = decoupled_;
  std::vector<std::vector<Tensor>> states(params.size());
  std::vector<detail::StepTensor> tensors(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    ParamState& s = state(params[i]);
    if (s.buffers.empty()) s.buffers = {zeros_like(params[i]), zeros_like(params[i])};  // exp_avg, exp_avg_sq
    states[i] = s.buffers;
    ++s.step;
    tensors[i].device_step = advance_device_step(s, params[i], o.capturable(), decoupled_ ? "AdamW" : "Adam");
    // As torch.optim.Adam computes them on the host, in double.
    const double step = static_cast<double>(s.step);
    tensors[i].step_size = o.lr() / (1 - std::pow(hyper.beta1, step));
    tensors[i].bias_correction2_sqrt = std::sqrt(1 - std::pow(hyper.beta2, step));
  }
  detail::optim::fused_step(hyper, params, grads, states, tensors);
}

nn::StateDict Adam::group_options(size_t group) const {
  const AdamOptions& o = options_.at(group);
  return {{"lr", number_tensor(o.lr())},
          {"betas", tensor({o.betas().first, o.betas().second}, TensorOptions(kFloat64))},
          {"eps", number_tensor(o.eps())},
          {"weight_decay", number_tensor(o.weight_decay())},
          {"maximize", flag_tensor(o.maximize())}};
}

void Adam::load_group_options(size_t group, const nn::StateDict& options, bool apply) {
  const Tensor& betas = options.at("betas");
  EMBER_CHECK(!is_complex(betas.dtype()), ValueError, "option 'betas' must be two real numbers");
  const std::vector<double> b = betas.to(kFloat64).to_vector<double>();
  // What state_dict() does not save (capturable) stays the group's own.
  AdamOptions o = options_.at(group);
  o.lr(number_of(options, "lr"))
      .betas({b.at(0), b.at(1)})
      .eps(number_of(options, "eps"))
      .weight_decay(number_of(options, "weight_decay"))
      .maximize(flag_of(options, "maximize"));
  check_options(o);
  if (apply) options_.at(group) = o;
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options) : Adam(/*decoupled_weight_decay=*/true) {
  add_param_group(std::move(params), options);
}

void AdamW::add_param_group(std::vector<Tensor> params, AdamWOptions options) {
  Adam::add_param_group(std::move(params), options);
}

}  // namespace ember::optim
