#include "ember/optim/sgd.h"

#include <cmath>

#include "ember/errors.h"
#include "ember/factories.h"
#include "nn/python_repr.h"
#include "optim/fused_step.h"

namespace ember::optim {
namespace {

void check_options(const SGDOptions& o) {
  using detail::python_float;
  // PyTorch refuses lr < 0 (and NaN); inf too here, which one step turns the parameters into.
  EMBER_CHECK(o.lr() >= 0.0 && std::isfinite(o.lr()), ValueError, "Invalid learning rate: ", python_float(o.lr()));
  EMBER_CHECK(o.momentum() >= 0.0, ValueError, "Invalid momentum value: ", python_float(o.momentum()));
  EMBER_CHECK(o.weight_decay() >= 0.0, ValueError, "Invalid weight_decay value: ", python_float(o.weight_decay()));
  EMBER_CHECK(!o.nesterov() || (o.momentum() > 0 && o.dampening() == 0), ValueError,
              "Nesterov momentum requires a momentum and zero dampening");
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options) { add_param_group(std::move(params), options); }

void SGD::add_param_group(std::vector<Tensor> params, SGDOptions options) {
  check_options(options);
  add_group(std::move(params));
  options_.push_back(options);
}

void SGD::check_group(size_t group) const { check_options(options_.at(group)); }

void SGD::update(size_t group, const std::vector<Tensor>& params, const std::vector<Tensor>& grads) {
  const SGDOptions& o = options_[group];  // checked by check_group
  detail::StepHyper hyper;
  hyper.rule = detail::UpdateRule::SGD;
  hyper.lr = o.lr();
  hyper.weight_decay = o.weight_decay();
  hyper.momentum = o.momentum();
  hyper.dampening = o.dampening();
  hyper.nesterov = o.nesterov();
  hyper.maximize = o.maximize();
  std::vector<std::vector<Tensor>> states(params.size());
  std::vector<detail::StepTensor> tensors(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    ParamState& s = state(params[i]);
    if (o.momentum() != 0) {
      if (s.buffers.empty()) {
        s.buffers.push_back(empty_like(params[i]));  // set to the gradient by the first step
        tensors[i].first_step = true;
      } else if (s.step == 0) {
        // A buffer loaded by load_state_dict (which saves no count for SGD): its first
        // step was taken, so a capturable step's device count must not start at it.
        s.step = 1;
      }
      states[i] = s.buffers;
    }
    ++s.step;
    // SGD keeps no step count of its own; capturable with momentum, the first-step flag
    // comes from one on the device.
    const bool counts = o.capturable() && o.momentum() != 0;
    tensors[i].device_step = advance_device_step(s, params[i], o.capturable(), "SGD", counts);
  }
  detail::optim::fused_step(hyper, params, grads, states, tensors);
}

nn::StateDict SGD::group_options(size_t group) const {
  const SGDOptions& o = options_.at(group);
  return {{"lr", number_tensor(o.lr())},
          {"momentum", number_tensor(o.momentum())},
          {"dampening", number_tensor(o.dampening())},
          {"weight_decay", number_tensor(o.weight_decay())},
          {"nesterov", flag_tensor(o.nesterov())},
          {"maximize", flag_tensor(o.maximize())}};
}

void SGD::load_group_options(size_t group, const nn::StateDict& options, bool apply) {
  // What state_dict() does not save (capturable) stays the group's own.
  SGDOptions o = options_.at(group);
  o.lr(number_of(options, "lr"))
      .momentum(number_of(options, "momentum"))
      .dampening(number_of(options, "dampening"))
      .weight_decay(number_of(options, "weight_decay"))
      .nesterov(flag_of(options, "nesterov"))
      .maximize(flag_of(options, "maximize"));
  check_options(o);
  if (apply) options_.at(group) = o;
}

}  // namespace ember::optim
