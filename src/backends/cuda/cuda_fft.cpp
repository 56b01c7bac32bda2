// cuFFT plans and launch_fft on the driver backend (Note [FFT plan cache]).
//
// Note [cuFFT work areas]
// Plans are made with cufftSetAutoAllocation(0), so a cached plan holds no device memory
// of its own. Each execution takes a work area of the plan's size as a Workspace (Note
// [Driver temporaries]), on the launch stream, returned right after the transform is
// enqueued (PyTorch does the same).
// A cuFFT handle carries one stream and one work area at a time, so setting them and
// enqueueing the execution happen under the plan's mutex: two host threads may share a
// cached plan.
#include <cufft.h>

#include <memory>
#include <mutex>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_extensions.h"
#include "backends/cuda/cuda_fft_conv_kernels.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/cuda_workspace.h"
#include "ember/errors.h"
#include "kernels/fft_plan.h"

namespace ember::detail::driver {
namespace {

using fft::PlanKey;
using fft::TransformKind;

void check_cufft(cufftResult result, const char* call) {
  EMBER_CHECK(result == CUFFT_SUCCESS, CudaError, "cuFFT error: code ", static_cast<int>(result), " when calling `",
              call, "`");
}

cufftType cufft_type(const PlanKey& key) {
  const bool dbl = key.precision == kFloat64;
  switch (key.kind) {
    case TransformKind::C2C: return dbl ? CUFFT_Z2Z : CUFFT_C2C;
    case TransformKind::R2C: return dbl ? CUFFT_D2Z : CUFFT_R2C;
    case TransformKind::C2R: return dbl ? CUFFT_Z2D : CUFFT_C2R;
  }
  return CUFFT_C2C;
}

// cuFFT's advanced layout: element (b, x0, .., xk) at b * dist + ((x0 * embed1 + x1) * embed2 + ..) * stride.
// The op layer's layouts are dense, so the embeds follow from the strides.
struct Layout {
  std::vector<long long> embed;
  long long stride, dist;
};

Layout advanced_layout(const IntList& sizes, const IntList& strides, int64_t dist) {
  const size_t rank = sizes.size();
  Layout layout{std::vector<long long>(rank), strides[rank - 1], dist};
  layout.embed[0] = sizes[0];
  for (size_t d = 1; d < rank; ++d) {
    EMBER_ASSERT(strides[d] > 0 && strides[d - 1] % strides[d] == 0);
    layout.embed[d] = strides[d - 1] / strides[d];
  }
  return layout;
}

class CufftPlan final : public fft::Plan {
 public:
  CufftPlan(PlanKey key, int device) : Plan(std::move(key)), device_(device) {
    const PlanKey& k = this->key();
    DeviceScope scope(device);
    check_cufft(cufftCreate(&handle_), "cufftCreate");
    std::vector<long long> n(k.signal_sizes.begin(), k.signal_sizes.end());
    Layout in = advanced_layout(k.in_sizes(), k.in_strides, k.in_dist);
    Layout out = advanced_layout(k.out_sizes(), k.out_strides, k.out_dist);
    try {
      check_cufft(cufftSetAutoAllocation(handle_, 0), "cufftSetAutoAllocation");  // Note [cuFFT work areas]
      check_cufft(
          cufftMakePlanMany64(handle_, static_cast<int>(n.size()), n.data(), in.embed.data(), in.stride, in.dist,
                              out.embed.data(), out.stride, out.dist, cufft_type(k), k.batch, &work_size_),
          "cufftMakePlanMany64");
    } catch (...) {
      cufftDestroy(handle_);
      throw;
    }
  }
  ~CufftPlan() override { (void)cufftDestroy(handle_); }

  void execute(void* in, void* out, cudaStream_t stream) const {
    std::lock_guard<std::mutex> lock(mutex_);
    check_cufft(cufftSetStream(handle_, stream), "cufftSetStream");
    Workspace work(device_, work_size_);  // Note [Driver temporaries]
    check_cufft(cufftSetWorkArea(handle_, work.get()), "cufftSetWorkArea");
    const PlanKey& k = key();
    const bool dbl = k.precision == kFloat64;
    switch (k.kind) {
      case TransformKind::C2C:
        if (dbl)
          check_cufft(cufftExecZ2Z(handle_, static_cast<cufftDoubleComplex*>(in), static_cast<cufftDoubleComplex*>(out),
                                   k.forward ? CUFFT_FORWARD : CUFFT_INVERSE),
                      "cufftExecZ2Z");
        else
          check_cufft(cufftExecC2C(handle_, static_cast<cufftComplex*>(in), static_cast<cufftComplex*>(out),
                                   k.forward ? CUFFT_FORWARD : CUFFT_INVERSE),
                      "cufftExecC2C");
        break;
      case TransformKind::R2C:
        if (dbl)
          check_cufft(cufftExecD2Z(handle_, static_cast<cufftDoubleReal*>(in), static_cast<cufftDoubleComplex*>(out)),
                      "cufftExecD2Z");
        else
          check_cufft(cufftExecR2C(handle_, static_cast<cufftReal*>(in), static_cast<cufftComplex*>(out)),
                      "cufftExecR2C");
        break;
      case TransformKind::C2R:
        if (dbl)
          check_cufft(cufftExecZ2D(handle_, static_cast<cufftDoubleComplex*>(in), static_cast<cufftDoubleReal*>(out)),
                      "cufftExecZ2D");
        else
          check_cufft(cufftExecC2R(handle_, static_cast<cufftComplex*>(in), static_cast<cufftReal*>(out)),
                      "cufftExecC2R");
        break;
    }
  }

 private:
  int device_;
  cufftHandle handle_ = 0;
  size_t work_size_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace

std::shared_ptr<const fft::Plan> create_cufft_plan(const fft::PlanKey& key, int device) {
  return std::make_shared<const CufftPlan>(key, device);
}

void launch_fft(const KernelCall& call, cudaStream_t stream) {
  EMBER_ASSERT(call.inputs.size() == 1 && call.outputs.size() == 1);
  const auto& plan = static_cast<const CufftPlan&>(call.payload.get<fft::Plan>(call.op));
  const TensorArg& out = call.outputs[0];
  plan.execute(call.inputs[0].data, out.data, stream);
  const double scale = call.arg<kargs::Fft>().scale;
  if (scale != 1.0) {
    // The op layer hands over a dense output: scale it as one flat array of reals.
    const int64_t reals = out.numel() * (is_complex(out.dtype) ? 2 : 1);
    launch_fft_scale(out.data, reals, to_real(out.dtype) == kFloat64, scale, stream);
  }
  check_launch(stream);
}

}  // namespace ember::detail::driver
