// cpu::run_fft: executes a host FFT plan (Note [FFTW and threads]) and normalizes.
//
// KernelCall contract (built by src/fft/fft_ops.cpp):
//   payload    a fft::HostPlan (shared, so an evicted plan outlives queued work)
//   inputs[0]  the input signal, laid out as the plan's key says; overwritten for C2R
//   outputs[0] the output, sizes {batch, out_sizes...} with its strides
//   args       kargs::Fft: scale, the normalization factor applied to every output element (1: none)
#include <complex>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/fftw_plan.h"
#include "ember/errors.h"

namespace ember::detail::cpu {
namespace {

// Multiplies every element of a strided real or complex array by `scale`.
template <typename T, typename Real>
void scale_strided(const TensorArg& arg, Real scale) {
  const size_t rank = arg.sizes.size();
  const int64_t numel = arg.numel();
  std::vector<int64_t> index(rank, 0);
  T* base = static_cast<T*>(arg.data);
  int64_t offset = 0;
  for (int64_t i = 0; i < numel; ++i) {
    base[offset] *= scale;
    for (size_t d = rank; d-- > 0;) {  // odometer over the dims, last fastest
      offset += arg.strides[d];
      if (++index[d] < arg.sizes[d]) break;
      offset -= arg.strides[d] * arg.sizes[d];
      index[d] = 0;
    }
  }
}

void scale_output(const TensorArg& out, double scale) {
  switch (out.dtype) {
    case kFloat32: scale_strided<float>(out, static_cast<float>(scale)); break;
    case kFloat64: scale_strided<double>(out, scale); break;
    case kComplex64: scale_strided<std::complex<float>>(out, static_cast<float>(scale)); break;
    case kComplex128: scale_strided<std::complex<double>>(out, scale); break;
    default: EMBER_ASSERT(false);
  }
}

}  // namespace

void run_fft(const KernelCall& call) {
  EMBER_ASSERT(call.inputs.size() == 1 && call.outputs.size() == 1);
  const auto& plan = static_cast<const fft::HostPlan&>(call.payload.get<fft::Plan>(call.op));
  plan.execute(call.inputs[0].data, call.outputs[0].data);
  const double scale = call.arg<kargs::Fft>().scale;
  if (scale != 1.0) scale_output(call.outputs[0], scale);
}

}  // namespace ember::detail::cpu
