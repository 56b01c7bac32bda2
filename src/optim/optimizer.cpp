#include "ember/optim/optimizer.h"

#include <algorithm>
#include <cmath>

#include "core/tensor_impl.h"
#include "ember/autograd.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "nn/clear_grad.h"
#include "nn/python_repr.h"
#include "optim/amp_step.h"
#include "runtime/backend.h"
#include "runtime/context.h"

namespace ember::optim {

using ember::detail::cat;

namespace {

bool capturing_on(const Tensor& param) {
  if (!param.device().is_cuda()) return false;
  detail::StreamState* stream = detail::current_stream_state(param.device().index());
  return detail::backend().capture_status(stream->native()).first != detail::CaptureStatus::None;
}

}  // namespace

const float* Optimizer::advance_device_step(ParamState& s, const Tensor& param, bool capturable, const char* name,
                                            bool counts) {
  const bool capturing = capturing_on(param);
  EMBER_CHECK(capturable || !capturing, CudaError, "Attempting CUDA graph capture of step() for an instance of ", name,
              " but param_groups' capturable is False.");
  if (!capturable || !counts) return nullptr;
  EMBER_CHECK(param.device().is_cuda(), ValueError, name,
              "(capturable=True): the parameters and their state must be CUDA tensors");
  if (!s.device_step.defined()) {
    // Made eagerly: in a capture its fill would rerun on every replay and reset the count.
    EMBER_CHECK(!capturing, CudaError, name, "(capturable=True): the step that creates the optimizer's state cannot ",
                "be captured; take a step (warm up) before capturing one");
    // The count before this step (the caller has counted it on the host already).
    s.device_step = full({}, static_cast<double>(s.step - 1), TensorOptions(kFloat32).device(param.device()));
  }
  s.device_step += 1.0;
  return s.device_step.data_ptr<float>();
}

void Optimizer::add_group(std::vector<Tensor> params) {
  EMBER_CHECK(!params.empty(), ValueError, "optimizer got an empty parameter list");
  std::vector<Tensor> unique;
  for (const Tensor& p : params) {
    EMBER_CHECK(p.defined(), ValueError, "optimizer got an undefined tensor as a parameter");
    EMBER_CHECK(is_floating_point(p.dtype()) || is_complex(p.dtype()), TypeError,
                "optimizer can only optimize Tensors of floating point or complex dtype, but got ",
                dtype_name(p.dtype()));
    // As PyTorch 2.x: a computed tensor receives no gradient in .grad() unless it retains it.
    EMBER_CHECK(p.is_leaf() || p.retains_grad(), ValueError, "can't optimize a non-leaf Tensor");
    for (const auto& group : groups_) {
      EMBER_CHECK(std::none_of(group.begin(), group.end(), [&](const Tensor& q) { return q.is_same(p); }), ValueError,
                  "some parameters appear in more than one parameter group");
    }
    // A parameter listed twice in a group is updated once.
    if (std::none_of(unique.begin(), unique.end(), [&](const Tensor& q) { return q.is_same(p); })) unique.push_back(p);
  }
  groups_.push_back(std::move(unique));
  initial_lr_.emplace_back();
}

std::optional<double> Optimizer::initial_lr(size_t group) const {
  params(group);  // the range check
  return initial_lr_[group];
}

void Optimizer::set_initial_lr(double lr, size_t group) {
  params(group);
  EMBER_CHECK(std::isfinite(lr), ValueError, "Invalid initial_lr: ", detail::python_float(lr));
  initial_lr_[group] = lr;
}

double Optimizer::momentum(size_t group) const {
  params(group);
  throw ValueError(cat(type_name(), " has no momentum or betas"));
}

void Optimizer::set_momentum(double, size_t group) {
  params(group);
  throw ValueError(cat(type_name(), " has no momentum or betas"));
}

const std::vector<Tensor>& Optimizer::params(size_t group) const {
  EMBER_CHECK(group < groups_.size(), IndexError, "parameter group ", group, " out of range (the optimizer has ",
              groups_.size(), ")");
  return groups_[group];
}

void Optimizer::check_finite_lr(double lr) {
  EMBER_CHECK(std::isfinite(lr), ValueError, "Invalid learning rate: ", detail::python_float(lr));
}

void Optimizer::step() {
  NoGradGuard no_grad;
  for (size_t g = 0; g < groups_.size(); ++g) check_group(g);
  for (size_t g = 0; g < groups_.size(); ++g) {
    std::vector<Tensor> params, grads;
    for (const Tensor& p : groups_[g]) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      params.push_back(p);
      grads.push_back(std::move(grad));
    }
    if (params.empty()) continue;
    update(g, params, grads);
    if (detail::optim::amp_found_inf() != nullptr) {
      // A step the kernel skipped did not count: the device step counts go back by the flag.
      for (const Tensor& p : params) {
        ParamState& s = state(p);
        if (s.device_step.defined()) s.device_step.sub_(detail::optim::amp_found_inf_on(p.device()).reshape({}));
      }
    }
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& group : groups_) {
    for (Tensor& p : group) detail::nn::clear_grad(p, set_to_none);
  }
}

Optimizer::ParamState& Optimizer::state(const Tensor& param) {
  ParamState& s = state_[param.impl()];
  for (Tensor& buffer : s.buffers) {
    // The parameter moved (Module::to) after its state was made: follow it.
    if (buffer.defined() && (buffer.device() != param.device() || buffer.dtype() != param.dtype()))
      buffer = buffer.to(param.options()).contiguous();
  }
  return s;
}

}  // namespace ember::optim
