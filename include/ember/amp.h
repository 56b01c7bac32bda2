// Automatic mixed precision: torch.autocast and torch.amp.GradScaler (../shared/api-amp.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/device.h"
#include "ember/dtype.h"
#include "ember/nn/state_dict.h"
#include "ember/tensor.h"

namespace ember {

namespace optim {
class Optimizer;
}

/// torch.autocast as a scope guard: while it lives, ops on tensors of `device_type` run in
/// the precision PyTorch's autocast lists give them (Note [Autocast] in src/ops/autocast.cpp):
/// matmul, linear, conv*, bmm, baddbmm, addmm, attention and the recurrent cells in `dtype`;
/// exp, log, pow, softmax, sums, norms, losses, cdist... in float32; a few ops (cat and stack
/// on the cpu; tensordot, scatter_add and grid_sample on cuda) in the widest floating type of
/// their inputs; every other op in the type of its inputs. Only floating-point tensors of
/// `device_type` other than float64 are cast, and the casts are recorded by autograd, so each
/// parameter's gradient has the parameter's dtype.
///
/// `dtype` defaults to the device type's autocast dtype (float16 on cuda, bfloat16 on the cpu,
/// see set_autocast_dtype); float16 and bfloat16 are accepted on both. Guards nest: each
/// restores the state it found; the state is per thread (a new thread starts with autocast
/// off), and the backward pass of autograd does not autocast (its ops run in the dtypes the
/// forward chose). With `cache_enabled`, a float32 leaf that requires grad is cast once per
/// outermost guard (PyTorch's weight cast cache), and the copies are dropped when it ends.
class autocast {
 public:
  explicit autocast(DeviceType device_type, std::optional<DType> dtype = std::nullopt, bool enabled = true,
                    std::optional<bool> cache_enabled = std::nullopt);
  /// `device_type` as PyTorch spells it: "cuda" or "cpu"; anything else is a ValueError
  /// ("User specified an unsupported autocast device_type 'xla'"), as is a dtype other than
  /// float16 or bfloat16 (TypeError). Nothing changes on error.
  explicit autocast(const std::string& device_type, std::optional<DType> dtype = std::nullopt, bool enabled = true,
                    std::optional<bool> cache_enabled = std::nullopt);
  ~autocast();
  autocast(const autocast&) = delete;
  autocast& operator=(const autocast&) = delete;

 private:
  void enter(DeviceType device_type, std::optional<DType> dtype, bool enabled, std::optional<bool> cache_enabled);
  DeviceType device_type_;
  bool prev_enabled_ = false;
  DType prev_dtype_ = kFloat16;
  bool prev_cache_enabled_ = true;
};

/// Whether autocast is on for `device_type` on this thread (torch.is_autocast_enabled).
bool is_autocast_enabled(DeviceType device_type = kCUDA);
/// The dtype autocast casts to on `device_type` (torch.get_autocast_dtype).
DType get_autocast_dtype(DeviceType device_type = kCUDA);
/// Set this thread's state directly, as torch.set_autocast_enabled/_dtype (prefer the guard).
void set_autocast_enabled(DeviceType device_type, bool enabled);
void set_autocast_dtype(DeviceType device_type, DType dtype);
bool is_autocast_cache_enabled();
void set_autocast_cache_enabled(bool enabled);
/// Drops this thread's cached casts (torch.clear_autocast_cache).
void clear_autocast_cache();

namespace amp {

/// torch._amp_foreach_non_finite_check_and_unscale_: multiplies every gradient in place by
/// `inv_scale` (a one-element float32 tensor on their device) and sets `found_inf` (a
/// one-element float32 tensor on their device) to 1 if any element of any of them is inf or
/// NaN. One launch per device and dtype; nothing waits for the device. Undefined tensors are
/// skipped.
void foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& grads, Tensor& found_inf,
                                           const Tensor& inv_scale);
/// torch._amp_update_scale_: one launch on the scale's device updates `scale` (float32, one
/// element) and `growth_tracker` (int32, one element) from `found_inf` (float32, one element):
/// backoff on a non-zero found_inf, growth after growth_interval clean steps in a row.
void update_scale_(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                   double backoff_factor, int64_t growth_interval);

/// torch.amp.GradScaler: scales the loss so that small float16 gradients do not flush to
/// zero, unscales the gradients before the optimizer steps, skips a step whose gradients
/// hold an inf or NaN, and adapts the scale (backoff on a skipped step, growth after
/// growth_interval clean ones). The scale and growth tracker live on the device of the first
/// scaled tensor; step() is the only host synchronisation. A disabled scaler (enabled =
/// false, or device "cuda" where no cuda device exists) passes everything through.
class GradScaler {
 public:
  explicit GradScaler(const std::string& device = "cuda", double init_scale = 65536.0, double growth_factor = 2.0,
                      double backoff_factor = 0.5, int64_t growth_interval = 2000, bool enabled = true);
  explicit GradScaler(const char* device, double init_scale = 65536.0, double growth_factor = 2.0,
                      double backoff_factor = 0.5, int64_t growth_interval = 2000, bool enabled = true)
      : GradScaler(std::string(device), init_scale, growth_factor, backoff_factor, growth_interval, enabled) {}
  explicit GradScaler(Device device, double init_scale = 65536.0, double growth_factor = 2.0,
                      double backoff_factor = 0.5, int64_t growth_interval = 2000, bool enabled = true);

  /// outputs * scale (the scale moved to the output's device); a disabled scaler returns it as is.
  Tensor scale(const Tensor& outputs);
  std::vector<Tensor> scale(const std::vector<Tensor>& outputs);
  /// Divides the optimizer's gradients by the scale and records whether any is inf or NaN;
  /// at most once per optimizer between update()s.
  void unscale_(optim::Optimizer& optimizer);
  /// unscale_() if not done yet, then optimizer.step() unless a gradient was inf or NaN.
  /// Returns false when it skipped the step. A capturable optimizer (every group of an Adam,
  /// AdamW or SGD with capturable=True) skips on the device instead, without a host sync, so
  /// the whole step can be captured in a CUDA graph; step() then returns true.
  bool step(optim::Optimizer& optimizer);
  /// Updates the scale from this iteration's steps, or sets it to `new_scale`.
  void update(std::optional<double> new_scale = std::nullopt);
  /// Sets the scale to the single element of a float32 tensor (PyTorch's tensor new_scale).
  void update(const Tensor& new_scale);

  /// The scale (a host sync when it lives on a device); 1.0 when disabled.
  double get_scale() const;
  bool is_enabled() const noexcept { return enabled_; }
  double get_growth_factor() const noexcept { return growth_factor_; }
  void set_growth_factor(double factor) noexcept { growth_factor_ = factor; }
  double get_backoff_factor() const noexcept { return backoff_factor_; }
  void set_backoff_factor(double factor) noexcept { backoff_factor_ = factor; }
  int64_t get_growth_interval() const noexcept { return growth_interval_; }
  void set_growth_interval(int64_t interval) noexcept { growth_interval_ = interval; }

  /// "scale", "growth_factor", "backoff_factor" (0-d float64), "growth_interval",
  /// "_growth_tracker" (0-d int64); empty when disabled.
  nn::StateDict state_dict() const;
  /// Loads a state_dict(); a no-op when disabled. An empty dict is PyTorch's error; missing
  /// or ill-typed keys are a ValueError naming them, and nothing changes.
  void load_state_dict(const nn::StateDict& state_dict);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  struct OptimizerState {
    Stage stage = Stage::kReady;
    std::vector<std::pair<Device, Tensor>> found_inf_per_device;
  };
  void lazy_init(Device device);
  std::vector<std::pair<Device, Tensor>> unscale_grads(optim::Optimizer& optimizer, const Tensor& inv_scale,
                                                       bool allow_fp16);
  int64_t growth_tracker() const;

  bool enabled_;
  double init_scale_;
  double growth_factor_;
  double backoff_factor_;
  int64_t growth_interval_;
  int64_t init_growth_tracker_ = 0;
  Tensor scale_;           // float32 {1}, created by the first scale()
  Tensor growth_tracker_;  // int32 {1}
  std::map<const optim::Optimizer*, OptimizerState> per_optimizer_;
};

}  // namespace amp
}  // namespace ember
