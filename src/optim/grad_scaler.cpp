// amp::GradScaler: PyTorch's torch.amp.GradScaler (torch/amp/grad_scaler.py), with the scale and
// growth tracker on the device of the first scaled tensor. Per optimizer, between update()s:
// READY -> unscale_() -> UNSCALED -> step() -> STEPPED; step() from READY unscales first.
// unscale_ finds non-finite gradients with one launch per device and dtype into a found-inf
// flag per device; step() reads those flags (the only host synchronisation) and skips the
// optimizer when any is set; update() sums every optimizer's flags on the scale's device
// and updates the scale there with one more launch.
//
// Note [Scaler steps on the device]
// An optimizer whose every group is capturable (Adam, AdamW, SGD with capturable=True) steps
// without the host reading the flags, as PyTorch's optimizers with _step_supports_amp_scaling
// do: step() unscales as above, makes per device a flag (any found inf, 0 or 1), and takes the
// optimizer's step with those flags current (optim/amp_step.h): each fused launch gets its
// device's flag as one more input and changes nothing where it is set, and the device step
// counts go back by it. Nothing waits for the device, so the whole mixed-precision step can be
// captured in a CUDA graph and replayed; step() cannot know then whether the optimizer stepped
// and returns true (it returns false only for a step it knows was skipped). The host's own step
// count (used only by non-capturable steps) still counts a skipped step.
#include <cmath>
#include <string>
#include <utility>

#include "ember/amp.h"
#include "ember/autograd.h"
#include "ember/cuda.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"
#include "ember/optim/adam.h"
#include "ember/optim/optimizer.h"
#include "ember/optim/sgd.h"
#include "optim/amp_step.h"
#include "optim/scheduler_state.h"

namespace ember::amp {

namespace {

bool device_type_available(const Device& device) { return !device.is_cuda() || cuda::is_available(); }

thread_local const detail::optim::FoundInfFlags* current_flags = nullptr;

// Whether every group of `optimizer` steps on the device (Note [Scaler steps on the device]).
bool steps_on_device(optim::Optimizer& optimizer) {
  auto all_capturable = [&](auto& typed) {
    for (size_t g = 0; g < optimizer.num_param_groups(); ++g) {
      if (!typed.options(g).capturable()) return false;
    }
    return true;
  };
  if (auto* adam = dynamic_cast<optim::Adam*>(&optimizer)) return all_capturable(*adam);
  if (auto* sgd = dynamic_cast<optim::SGD*>(&optimizer)) return all_capturable(*sgd);
  return false;
}

}  // namespace

GradScaler::GradScaler(const std::string& device, double init_scale, double growth_factor, double backoff_factor,
                       int64_t growth_interval, bool enabled)
    : GradScaler(Device(device), init_scale, growth_factor, backoff_factor, growth_interval, enabled) {}

GradScaler::GradScaler(Device device, double init_scale, double growth_factor, double backoff_factor,
                       int64_t growth_interval, bool enabled)
    : enabled_(enabled && device_type_available(device)),
      init_scale_(init_scale),
      growth_factor_(growth_factor),
      backoff_factor_(backoff_factor),
      growth_interval_(growth_interval) {
  // PyTorch warns "GradScaler is enabled, but CUDA is not available.  Disabling." and passes
  // everything through; so does ember (is_enabled() tells).
  if (!enabled_) return;
  EMBER_CHECK(growth_factor > 1.0, ValueError, "The growth factor must be > 1.0.");
  EMBER_CHECK(backoff_factor < 1.0, ValueError, "The backoff factor must be < 1.0.");
  EMBER_CHECK(growth_interval > 0 && growth_interval <= INT32_MAX, ValueError,
              "The growth interval must be a positive 32-bit integer, got ", growth_interval);
  EMBER_CHECK(std::isfinite(init_scale) && init_scale > 0, ValueError,
              "The initial scale must be positive and finite, got ", init_scale);
}

// 0-dim, as PyTorch 2.x's torch.full((), ...): a scaled output keeps its shape, and its dtype
// (a 0-dim scale does not promote a float16 tensor to float32).
void GradScaler::lazy_init(Device device) {
  scale_ = full({}, init_scale_, TensorOptions(kFloat32).device(device));
  growth_tracker_ = full({}, init_growth_tracker_, TensorOptions(kInt32).device(device));
}

Tensor GradScaler::scale(const Tensor& outputs) {
  if (!enabled_) return outputs;
  EMBER_CHECK(outputs.defined(), ValueError, "GradScaler.scale: expected a defined tensor");
  if (!scale_.defined()) lazy_init(outputs.device());
  return outputs * scale_.to(outputs.device(), /*non_blocking=*/true);
}

std::vector<Tensor> GradScaler::scale(const std::vector<Tensor>& outputs) {
  if (!enabled_) return outputs;
  std::vector<Tensor> scaled;
  scaled.reserve(outputs.size());
  for (const Tensor& t : outputs) scaled.push_back(scale(t));
  return scaled;
}

std::vector<std::pair<Device, Tensor>> GradScaler::unscale_grads(optim::Optimizer& optimizer, const Tensor& inv_scale,
                                                                 bool allow_fp16) {
  // Every gradient checked first, so a float16 one refuses before anything is scaled.
  std::vector<std::pair<Device, std::vector<Tensor>>> per_device;
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) {
    for (const Tensor& param : optimizer.params(g)) {
      const Tensor grad = param.grad();
      if (!grad.defined()) continue;
      EMBER_CHECK(allow_fp16 || grad.dtype() != kFloat16, ValueError, "Attempting to unscale FP16 gradients.");
      auto it = per_device.begin();
      while (it != per_device.end() && it->first != grad.device()) ++it;
      if (it == per_device.end()) it = per_device.insert(it, {grad.device(), {}});
      it->second.push_back(grad);
    }
  }
  std::vector<std::pair<Device, Tensor>> found_infs;
  NoGradGuard no_grad;
  for (auto& [device, grads] : per_device) {
    Tensor found_inf = zeros({}, TensorOptions(kFloat32).device(device));
    foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale.to(device, /*non_blocking=*/true));
    found_infs.emplace_back(device, found_inf);
  }
  return found_infs;
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!enabled_) return;
  EMBER_CHECK(scale_.defined(), Error,
              "Attempted unscale_ but _scale is None.  This may indicate your script did "
              "not use scaler.scale(loss or outputs) earlier in the iteration.");
  OptimizerState& state = per_optimizer_[&optimizer];
  EMBER_CHECK(state.stage != Stage::kUnscaled, Error,
              "unscale_() has already been called on this optimizer since the last update().");
  EMBER_CHECK(state.stage != Stage::kStepped, Error, "unscale_() is being called after step().");
  // The inverse in float64, then float32, as PyTorch's scale.double().reciprocal().float().
  NoGradGuard no_grad;
  const Tensor inv_scale = (1.0 / scale_.to(kFloat64)).to(kFloat32);
  state.found_inf_per_device = unscale_grads(optimizer, inv_scale, /*allow_fp16=*/false);
  state.stage = Stage::kUnscaled;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  EMBER_CHECK(scale_.defined(), Error,
              "Attempted step but _scale is None.  This may indicate your script did not "
              "use scaler.scale(loss or outputs) earlier in the iteration.");
  {
    const OptimizerState& state = per_optimizer_[&optimizer];
    EMBER_CHECK(state.stage != Stage::kStepped, Error, "step() has already been called since the last update().");
    if (state.stage == Stage::kReady) unscale_(optimizer);
  }
  OptimizerState& state = per_optimizer_[&optimizer];
  EMBER_CHECK(!state.found_inf_per_device.empty(), Error, "No inf checks were recorded for this optimizer.");
  if (steps_on_device(optimizer)) {
    // Every device skips if any device found an inf: each gets the sum of all flags, as 0 or 1.
    NoGradGuard no_grad;
    detail::optim::FoundInfFlags flags;
    for (const auto& [device, unused] : state.found_inf_per_device) {
      Tensor sum;
      for (const auto& [other, flag] : state.found_inf_per_device) {
        Tensor here = flag.to(device, /*non_blocking=*/true);
        sum = sum.defined() ? sum + here : here;
      }
      flags.emplace_back(device, sum.gt(0.0).to(kFloat32));
    }
    {
      detail::optim::AmpFoundInfScope current(std::move(flags));
      optimizer.step();
    }
    state.stage = Stage::kStepped;
    return true;
  }
  double found = 0.0;
  for (const auto& [device, flag] : state.found_inf_per_device) found += flag.item<float>();
  const bool stepped = found == 0.0;
  if (stepped) optimizer.step();
  state.stage = Stage::kStepped;
  return stepped;
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!enabled_) return;
  EMBER_CHECK(scale_.defined(), Error,
              "Attempted update but _scale is None.  This may indicate your script did not "
              "use scaler.scale(loss or outputs) earlier in the iteration.");
  NoGradGuard no_grad;
  if (new_scale) {
    scale_.fill_(*new_scale);
  } else {
    Tensor combined;
    for (const auto& [optimizer, state] : per_optimizer_) {
      for (const auto& [device, flag] : state.found_inf_per_device) {
        Tensor here = flag.to(scale_.device(), /*non_blocking=*/true);
        combined = combined.defined() ? combined + here : here;
      }
    }
    EMBER_CHECK(combined.defined(), Error, "No inf checks were recorded prior to update.");
    update_scale_(scale_, growth_tracker_, combined, growth_factor_, backoff_factor_, growth_interval_);
  }
  per_optimizer_.clear();
}

void GradScaler::update(const Tensor& new_scale) {
  if (!enabled_) return;
  const char* reason = "new_scale should be a float or a 1-element torch.cuda.FloatTensor with requires_grad=False.";
  EMBER_CHECK(
      new_scale.defined() && new_scale.dtype() == kFloat32 && new_scale.numel() == 1 && !new_scale.requires_grad(),
      ValueError, reason);
  EMBER_CHECK(scale_.defined(), Error,
              "Attempted update but _scale is None.  This may indicate your script did not "
              "use scaler.scale(loss or outputs) earlier in the iteration.");
  NoGradGuard no_grad;
  scale_.copy_(new_scale.reshape({}));
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!enabled_) return 1.0;
  return scale_.defined() ? static_cast<double>(scale_.item<float>()) : init_scale_;
}

int64_t GradScaler::growth_tracker() const {
  return growth_tracker_.defined() ? growth_tracker_.item<int32_t>() : init_growth_tracker_;
}

nn::StateDict GradScaler::state_dict() const {
  nn::StateDict out;
  if (!enabled_) return out;
  using detail::optim::float_tensor;
  using detail::optim::int_tensor;
  out.insert("scale", float_tensor(get_scale()));
  out.insert("growth_factor", float_tensor(growth_factor_));
  out.insert("backoff_factor", float_tensor(backoff_factor_));
  out.insert("growth_interval", int_tensor(growth_interval_));
  out.insert("_growth_tracker", int_tensor(growth_tracker()));
  return out;
}

void GradScaler::load_state_dict(const nn::StateDict& state_dict) {
  if (!enabled_) return;
  EMBER_CHECK(!state_dict.empty(), Error,
              "The source state dict is empty, possibly because it was saved from a "
              "disabled instance of GradScaler.");
  detail::optim::SchedulerStateReader reader(state_dict);
  const double scale = reader.number("scale");
  const double growth_factor = reader.number("growth_factor");
  const double backoff_factor = reader.number("backoff_factor");
  const int64_t growth_interval = reader.integer("growth_interval");
  const int64_t tracker = reader.integer("_growth_tracker");
  reader.check(!reader.has("scale") || (std::isfinite(scale) && scale > 0), "scale must be positive and finite");
  reader.check(!reader.has("growth_factor") || growth_factor > 1.0, "The growth factor must be > 1.0.");
  reader.check(!reader.has("backoff_factor") || backoff_factor < 1.0, "The backoff factor must be < 1.0.");
  reader.check(!reader.has("growth_interval") || (growth_interval > 0 && growth_interval <= INT32_MAX),
               "growth_interval must be a positive 32-bit integer");
  reader.check(!reader.has("_growth_tracker") || (tracker >= 0 && tracker <= INT32_MAX),
               "_growth_tracker must be a non-negative 32-bit integer");
  const std::vector<std::string> errors = reader.errors();
  if (!errors.empty()) {
    std::string message = "Error(s) in loading state_dict for GradScaler:";
    for (const std::string& e : errors) message += "\n\t" + e;
    throw ValueError(message);
  }
  init_scale_ = scale;
  growth_factor_ = growth_factor;
  backoff_factor_ = backoff_factor;
  growth_interval_ = growth_interval;
  init_growth_tracker_ = tracker;
  NoGradGuard no_grad;
  if (scale_.defined()) scale_.fill_(scale);
  if (growth_tracker_.defined()) growth_tracker_.fill_(tracker);
}

}  // namespace ember::amp

namespace ember::detail::optim {

const FoundInfFlags* amp_found_inf() noexcept { return amp::current_flags; }

Tensor amp_found_inf_on(Device device) {
  if (amp::current_flags == nullptr) return Tensor();
  for (const auto& [d, flag] : *amp::current_flags) {
    if (d == device) return flag;
  }
  return Tensor();
}

AmpFoundInfScope::AmpFoundInfScope(FoundInfFlags flags) : flags_(std::move(flags)), previous_(amp::current_flags) {
  amp::current_flags = &flags_;
}

AmpFoundInfScope::~AmpFoundInfScope() { amp::current_flags = previous_; }

}  // namespace ember::detail::optim
