// BatchNormStats (contract in kernels/loss_kernels.h): per-channel mean and biased variance,
// two passes in double so that large batches keep full float accuracy.
#include <algorithm>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/loss_kernels.h"

namespace ember::detail::cpu {
namespace {

template <typename T>
void stats_typed(const KernelCall& call) {
  const TensorArg& in = call.inputs[0];
  const int64_t batch = in.sizes[0], channels = in.sizes[1], spatial = in.sizes[2];
  const int64_t sn = in.strides[0], sc = in.strides[1], ss = in.strides[2];
  const T* x = static_cast<const T*>(in.data);
  T* mean_out = static_cast<T*>(call.outputs[0].data);
  T* var_out = static_cast<T*>(call.outputs[1].data);
  const int64_t mean_stride = call.outputs[0].strides.empty() ? 1 : call.outputs[0].strides[0];
  const int64_t var_stride = call.outputs[1].strides.empty() ? 1 : call.outputs[1].strides[0];
  const int64_t count = batch * spatial;
  parallel_for(0, channels, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(count, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t c = begin; c < end; ++c) {
                   double sum = 0;
                   for (int64_t n = 0; n < batch; ++n) {
                     const T* row = x + n * sn + c * sc;
                     double part = 0;
                     if (ss == 1) {
                       for (int64_t s = 0; s < spatial; ++s) part += convert<double>(row[s]);
                     } else {
                       for (int64_t s = 0; s < spatial; ++s) part += convert<double>(row[s * ss]);
                     }
                     sum += part;
                   }
                   const double mean = count > 0 ? sum / static_cast<double>(count) : 0.0;
                   double squares = 0;
                   for (int64_t n = 0; n < batch; ++n) {
                     const T* row = x + n * sn + c * sc;
                     for (int64_t s = 0; s < spatial; ++s) {
                       const double d = convert<double>(row[s * ss]) - mean;
                       squares += d * d;
                     }
                   }
                   mean_out[c * mean_stride] = convert<T>(mean);
                   var_out[c * var_stride] = convert<T>(count > 0 ? squares / static_cast<double>(count) : 0.0);
                 }
               });
}

}  // namespace

void run_batch_norm_stats(const KernelCall& call) {
  EMBER_CHECK(call.inputs.size() == 1 && call.outputs.size() == 2, ValueError,
              "batch_norm: expected 1 input and 2 outputs");
  EMBER_ASSERT(call.inputs[0].sizes.size() == 3);
  dispatch(call.inputs[0].dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (!is_floating_v<T>) not_implemented("batch_norm", call.inputs[0].dtype);
    else stats_typed<T>(call);
  });
}

}  // namespace ember::detail::cpu
