// LayerNorm and LayerNormBackward (contracts in kernels/transformer_kernels.h).
//
// Forward: one pass per row in double gives the mean, a second the biased variance, a
// third writes (x - mean) * rstd * weight + bias; rows run on several threads.
// Backward: the input's gradient is per row (two sums over the row, then one write); the
// weight's and bias's gradients are column sums, taken over rows in row order by threads
// that own disjoint column ranges, so they do not depend on the thread count.
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/transformer_kernels.h"

namespace ember::detail::cpu {
namespace {

template <typename T>
void layer_norm_typed(const KernelCall& call) {
  const TensorArg& in = call.inputs[0];
  const int64_t rows = in.sizes[0], cols = in.sizes[1];
  const T* x = static_cast<const T*>(in.data);
  size_t next = 1;
  const T* w = (call.dim & kLayerNormWeight) ? static_cast<const T*>(call.inputs[next++].data) : nullptr;
  const T* b = (call.dim & kLayerNormBias) ? static_cast<const T*>(call.inputs[next++].data) : nullptr;
  T* y = static_cast<T*>(call.outputs[0].data);
  T* mean_out = static_cast<T*>(call.outputs[1].data);
  T* rstd_out = static_cast<T*>(call.outputs[2].data);
  const double eps = call.s0.to<double>();
  parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(cols, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* row = x + r * cols;
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += convert<double>(row[c]);
      const double mean = cols > 0 ? sum / static_cast<double>(cols) : 0.0;
      double squares = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double dev = convert<double>(row[c]) - mean;
        squares += dev * dev;
      }
      const double var = cols > 0 ? squares / static_cast<double>(cols) : 0.0;
      const double rstd = 1.0 / std::sqrt(var + eps);
      using C = compute_t<T>;
      const C m = static_cast<C>(mean), s = static_cast<C>(rstd);
      T* out = y + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        C v = (convert<C>(row[c]) - m) * s;
        if (w != nullptr) v = v * convert<C>(w[c]);
        if (b != nullptr) v = v + convert<C>(b[c]);
        out[c] = convert<T>(v);
      }
      mean_out[r] = convert<T>(mean);
      rstd_out[r] = convert<T>(rstd);
    }
  });
}

template <typename T>
void layer_norm_backward_typed(const KernelCall& call) {
  const int64_t rows = call.inputs[1].sizes[0], cols = call.inputs[1].sizes[1];
  const T* g = static_cast<const T*>(call.inputs[0].data);
  const T* x = static_cast<const T*>(call.inputs[1].data);
  const T* mean = static_cast<const T*>(call.inputs[2].data);
  const T* rstd = static_cast<const T*>(call.inputs[3].data);
  const T* w = (call.dim & kLayerNormWeight) ? static_cast<const T*>(call.inputs[4].data) : nullptr;
  size_t next = 0;
  T* gx = (call.dim & kLayerNormGradInput) ? static_cast<T*>(call.outputs[next++].data) : nullptr;
  T* gw = (call.dim & kLayerNormGradWeight) ? static_cast<T*>(call.outputs[next++].data) : nullptr;
  T* gb = (call.dim & kLayerNormGradBias) ? static_cast<T*>(call.outputs[next++].data) : nullptr;
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(cols, 1));
  if (gx != nullptr) {
    parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* gr = g + r * cols;
        const T* xr = x + r * cols;
        const double m = convert<double>(mean[r]), s = convert<double>(rstd[r]);
        // With gh = g * weight and xh = (x - mean) * rstd:
        // dx = rstd * (gh - mean(gh) - xh * mean(gh * xh)).
        double sum_gh = 0, sum_gh_xh = 0;
        for (int64_t c = 0; c < cols; ++c) {
          const double gh = convert<double>(gr[c]) * (w != nullptr ? convert<double>(w[c]) : 1.0);
          sum_gh += gh;
          sum_gh_xh += gh * (convert<double>(xr[c]) - m) * s;
        }
        const double n = static_cast<double>(cols);
        const double mean_gh = sum_gh / n, mean_gh_xh = sum_gh_xh / n;
        T* out = gx + r * cols;
        for (int64_t c = 0; c < cols; ++c) {
          const double gh = convert<double>(gr[c]) * (w != nullptr ? convert<double>(w[c]) : 1.0);
          const double xh = (convert<double>(xr[c]) - m) * s;
          out[c] = convert<T>(s * (gh - mean_gh - xh * mean_gh_xh));
        }
      }
    });
  }
  if (gw == nullptr && gb == nullptr) return;
  parallel_for(0, cols, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(rows, 1)), [&](int64_t begin, int64_t end) {
    std::vector<double> sum_w(static_cast<size_t>(end - begin), 0.0), sum_b(static_cast<size_t>(end - begin), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const T* gr = g + r * cols;
      const T* xr = x + r * cols;
      const double m = convert<double>(mean[r]), s = convert<double>(rstd[r]);
      for (int64_t c = begin; c < end; ++c) {
        const double gv = convert<double>(gr[c]);
        sum_w[static_cast<size_t>(c - begin)] += gv * (convert<double>(xr[c]) - m) * s;
        sum_b[static_cast<size_t>(c - begin)] += gv;
      }
    }
    for (int64_t c = begin; c < end; ++c) {
      if (gw != nullptr) gw[c] = convert<T>(sum_w[static_cast<size_t>(c - begin)]);
      if (gb != nullptr) gb[c] = convert<T>(sum_b[static_cast<size_t>(c - begin)]);
    }
  });
}

}  // namespace

void run_layer_norm(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 3 && !call.inputs.empty(), ValueError, "layer_norm: expected 3 outputs");
  EMBER_ASSERT(call.inputs[0].sizes.size() == 2);
  dispatch(call.inputs[0].dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (!is_floating_v<T>) not_implemented("LayerNormKernelImpl", call.inputs[0].dtype);
    else layer_norm_typed<T>(call);
  });
}

void run_layer_norm_backward(const KernelCall& call) {
  EMBER_CHECK(call.inputs.size() >= 4, ValueError, "layer_norm_backward: expected at least 4 inputs");
  EMBER_ASSERT(call.inputs[1].sizes.size() == 2);
  dispatch(call.inputs[1].dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (!is_floating_v<T>) not_implemented("LayerNormBackwardKernelImpl", call.inputs[1].dtype);
    else layer_norm_backward_typed<T>(call);
  });
}

}  // namespace ember::detail::cpu
