// Host FFT plans (FFTW), used for cpu tensors and by the emulated cuda backend.
//
// Note [FFTW and threads]
// FFTW's planner (fftw_plan_*, fftw_destroy_plan) is not thread-safe; its new-array
// execute functions (fftw_execute_dft & co.) are. Plans are therefore made and destroyed
// under one process-wide mutex and executed without it, on whatever thread runs the
// kernel (the caller for cpu tensors, a stream worker for emulated devices), on the
// arrays of that call. Plans are made with FFTW_ESTIMATE (planning does not touch the
// arrays, so it is cheap and safe while other work runs), always out of place. A plan
// made on SIMD-aligned arrays may only execute on equally aligned ones; tensors from our
// allocators are, but a view with a storage offset may not be, so such calls use a second
// plan made with FFTW_UNALIGNED (slower: no SIMD), created the first time it is needed.
#pragma once

#include <memory>
#include <mutex>

#include "kernels/fft_plan.h"

namespace ember::detail::fft {

class HostPlan final : public Plan {
 public:
  explicit HostPlan(PlanKey key);
  ~HostPlan() override;
  /// Runs the transform from `in` to `out` (unnormalized). Complex-to-real transforms
  /// overwrite `in`, so callers pass a scratch copy.
  void execute(void* in, void* out) const;

 private:
  void* aligned_plan_ = nullptr;  // fftwf_plan or fftw_plan, by key().precision
  mutable std::once_flag unaligned_once_;
  mutable void* unaligned_plan_ = nullptr;
};

}  // namespace ember::detail::fft

namespace ember::detail::cpu {

/// The cpu backend's FFT plans (FFTW), also the emulated backend's create_fft_plan.
std::shared_ptr<const fft::Plan> create_fft_plan(const fft::PlanKey& key);

}  // namespace ember::detail::cpu
