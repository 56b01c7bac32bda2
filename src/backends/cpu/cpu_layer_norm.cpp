// LayerNorm and LayerNormBackward (contracts in kernels/transformer_kernels.h).
//
// Forward, per row: the mean, then the biased variance of the deviations (two passes over
// a row that stays in cache), then (x - mean) * rstd * weight + bias; rows run on several
// threads. Backward: the input's gradient is per row (two sums over the row, then one
// write); the weight's and bias's gradients are column sums taken over rows in row order
// (blocks of 64 rows in the row type's accumulator, the blocks' sums in double) by threads
// that own disjoint column ranges, so they do not depend on the thread count. Float rows sum in eight float lanes (the
// compiler does not reassociate a float sum; lanes let it vectorise), compiled for AVX2 and the baseline
// (EMBER_VECTOR_CLONES); float64 sums in double, float16/bfloat16 in float.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/cpu_vector.h"
#include "kernels/transformer_kernels.h"

namespace ember::detail::cpu {
namespace {

constexpr int kLanes = 8;

// The row statistics and output of one row, for storage type T computed in A.
template <typename T, typename A>
inline void normalize_row(const T* x, T* y, const T* w, const T* b, int64_t n, A eps, T* mean_out, T* rstd_out) {
  A lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] += convert<A>(x[i + j]);
  }
  A sum = 0;
  for (int j = 0; j < kLanes; ++j) sum += lanes[j];
  for (; i < n; ++i) sum += convert<A>(x[i]);
  const A mean = sum / static_cast<A>(n);
  A sq[kLanes] = {};
  i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const A d = convert<A>(x[i + j]) - mean;
      sq[j] += d * d;
    }
  }
  A squares = 0;
  for (int j = 0; j < kLanes; ++j) squares += sq[j];
  for (; i < n; ++i) {
    const A d = convert<A>(x[i]) - mean;
    squares += d * d;
  }
  const A rstd = A(1) / std::sqrt(squares / static_cast<A>(n) + eps);
  if (w != nullptr && b != nullptr) {
    for (int64_t k = 0; k < n; ++k)
      y[k] = convert<T>((convert<A>(x[k]) - mean) * rstd * convert<A>(w[k]) + convert<A>(b[k]));
  } else if (w != nullptr) {
    for (int64_t k = 0; k < n; ++k) y[k] = convert<T>((convert<A>(x[k]) - mean) * rstd * convert<A>(w[k]));
  } else if (b != nullptr) {
    for (int64_t k = 0; k < n; ++k) y[k] = convert<T>((convert<A>(x[k]) - mean) * rstd + convert<A>(b[k]));
  } else {
    for (int64_t k = 0; k < n; ++k) y[k] = convert<T>((convert<A>(x[k]) - mean) * rstd);
  }
  *mean_out = convert<T>(mean);
  *rstd_out = convert<T>(rstd);
}

EMBER_VECTOR_CLONES void normalize_float_row(const float* x, float* y, const float* w, const float* b, int64_t n,
                                             float eps, float* mean_out, float* rstd_out) {
  normalize_row<float, float>(x, y, w, b, n, eps, mean_out, rstd_out);
}

// With gh = g * weight and xh = (x - mean) * rstd: dx = rstd * (gh - mean(gh) - xh * mean(gh * xh)).
template <typename T, typename A, bool kWeight>
inline void grad_input_row(const T* g, const T* x, const T* w, A mean, A rstd, int64_t n, T* gx) {
  auto gh_at = [&](int64_t k) {
    if constexpr (kWeight) return convert<A>(g[k]) * convert<A>(w[k]);
    else return convert<A>(g[k]);
  };
  A lanes_gh[kLanes] = {}, lanes_ghxh[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const A gh = gh_at(i + j);
      lanes_gh[j] += gh;
      lanes_ghxh[j] += gh * ((convert<A>(x[i + j]) - mean) * rstd);
    }
  }
  A sum_gh = 0, sum_ghxh = 0;
  for (int j = 0; j < kLanes; ++j) sum_gh += lanes_gh[j], sum_ghxh += lanes_ghxh[j];
  for (; i < n; ++i) {
    const A gh = gh_at(i);
    sum_gh += gh;
    sum_ghxh += gh * ((convert<A>(x[i]) - mean) * rstd);
  }
  const A mean_gh = sum_gh / static_cast<A>(n), mean_ghxh = sum_ghxh / static_cast<A>(n);
  for (int64_t k = 0; k < n; ++k) {
    const A xh = (convert<A>(x[k]) - mean) * rstd;
    gx[k] = convert<T>(rstd * (gh_at(k) - mean_gh - xh * mean_ghxh));
  }
}

#if defined(__GNUC__)
typedef float FloatLanes __attribute__((vector_size(kLanes * sizeof(float))));

// The float row's two sums in GCC vector lanes (the lane arrays of grad_input_row do not
// vectorise cleanly as a pair), then the same write.
EMBER_VECTOR_CLONES void grad_input_float_row(const float* g, const float* x, const float* w, float mean, float rstd,
                                              int64_t n, float* gx) {
  FloatLanes sum_gh_lanes = {}, sum_ghxc_lanes = {};  // sums of gh and gh * (x - mean)
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    FloatLanes gv, xv;
    std::memcpy(&gv, g + i, sizeof gv);
    std::memcpy(&xv, x + i, sizeof xv);
    if (w != nullptr) {
      FloatLanes wv;
      std::memcpy(&wv, w + i, sizeof wv);
      gv *= wv;
    }
    sum_gh_lanes += gv;
    sum_ghxc_lanes += gv * (xv - mean);
  }
  float sum_gh = 0, sum_ghxc = 0;
  for (int j = 0; j < kLanes; ++j) sum_gh += sum_gh_lanes[j], sum_ghxc += sum_ghxc_lanes[j];
  for (; i < n; ++i) {
    const float gh = w != nullptr ? g[i] * w[i] : g[i];
    sum_gh += gh;
    sum_ghxc += gh * (x[i] - mean);
  }
  const float mean_gh = sum_gh / static_cast<float>(n), mean_ghxh = sum_ghxc * rstd / static_cast<float>(n);
  if (w != nullptr) {
    for (int64_t k = 0; k < n; ++k) gx[k] = rstd * (g[k] * w[k] - mean_gh - (x[k] - mean) * rstd * mean_ghxh);
  } else {
    for (int64_t k = 0; k < n; ++k) gx[k] = rstd * (g[k] - mean_gh - (x[k] - mean) * rstd * mean_ghxh);
  }
}
#else
void grad_input_float_row(const float* g, const float* x, const float* w, float mean, float rstd, int64_t n,
                          float* gx) {
  if (w != nullptr) grad_input_row<float, float, true>(g, x, w, mean, rstd, n, gx);
  else grad_input_row<float, float, false>(g, x, w, mean, rstd, n, gx);
}
#endif

// Adds rows [r0, r1) of g * xh and g, columns [c0, c0 + n), into sum_w and sum_b: per
// column in row order, in A within the block (vectorised across columns).
template <typename T, typename A>
inline void column_sums(const T* g, const T* x, const T* mean, const T* rstd, int64_t cols, int64_t r0, int64_t r1,
                        int64_t c0, int64_t n, A* sum_w, A* sum_b) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* gr = g + r * cols + c0;
    const T* xr = x + r * cols + c0;
    const A m = convert<A>(mean[r]), s = convert<A>(rstd[r]);
    for (int64_t c = 0; c < n; ++c) {
      const A gv = convert<A>(gr[c]);
      sum_w[c] += gv * ((convert<A>(xr[c]) - m) * s);
      sum_b[c] += gv;
    }
  }
}

EMBER_VECTOR_CLONES void column_sums_float(const float* g, const float* x, const float* mean, const float* rstd,
                                           int64_t cols, int64_t r0, int64_t r1, int64_t c0, int64_t n, float* sum_w,
                                           float* sum_b) {
  column_sums<float, float>(g, x, mean, rstd, cols, r0, r1, c0, n, sum_w, sum_b);
}

template <typename T>
using row_acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
void layer_norm_typed(const KernelCall& call) {
  using A = row_acc_t<T>;
  const TensorArg& in = call.inputs[0];
  const int64_t rows = in.sizes[0], cols = in.sizes[1];
  const T* x = static_cast<const T*>(in.data);
  size_t next = 1;
  const auto& args = call.arg<kargs::LayerNorm>();
  const T* w = (args.parts & kLayerNormWeight) ? static_cast<const T*>(call.inputs[next++].data) : nullptr;
  const T* b = (args.parts & kLayerNormBias) ? static_cast<const T*>(call.inputs[next++].data) : nullptr;
  T* y = static_cast<T*>(call.outputs[0].data);
  T* mean = static_cast<T*>(call.outputs[1].data);
  T* rstd = static_cast<T*>(call.outputs[2].data);
  const A eps = static_cast<A>(args.eps);
  parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(cols, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      if constexpr (std::is_same_v<T, float>) {
        normalize_float_row(x + r * cols, y + r * cols, w, b, cols, eps, mean + r, rstd + r);
      } else {
        normalize_row<T, A>(x + r * cols, y + r * cols, w, b, cols, eps, mean + r, rstd + r);
      }
    }
  });
}

template <typename T>
void layer_norm_backward_typed(const KernelCall& call) {
  using A = row_acc_t<T>;
  const int64_t rows = call.inputs[1].sizes[0], cols = call.inputs[1].sizes[1];
  const T* g = static_cast<const T*>(call.inputs[0].data);
  const T* x = static_cast<const T*>(call.inputs[1].data);
  const T* mean = static_cast<const T*>(call.inputs[2].data);
  const T* rstd = static_cast<const T*>(call.inputs[3].data);
  const int64_t parts = call.arg<kargs::LayerNorm>().parts;
  const T* w = (parts & kLayerNormWeight) ? static_cast<const T*>(call.inputs[4].data) : nullptr;
  size_t next = 0;
  T* gx = (parts & kLayerNormGradInput) ? static_cast<T*>(call.outputs[next++].data) : nullptr;
  T* gw = (parts & kLayerNormGradWeight) ? static_cast<T*>(call.outputs[next++].data) : nullptr;
  T* gb = (parts & kLayerNormGradBias) ? static_cast<T*>(call.outputs[next++].data) : nullptr;
  if (gx != nullptr) {
    parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(cols, 1)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t r = begin; r < end; ++r) {
                     const A m = convert<A>(mean[r]), s = convert<A>(rstd[r]);
                     if constexpr (std::is_same_v<T, float>) {
                       grad_input_float_row(g + r * cols, x + r * cols, w, m, s, cols, gx + r * cols);
                     } else if (w != nullptr) {
                       grad_input_row<T, A, true>(g + r * cols, x + r * cols, w, m, s, cols, gx + r * cols);
                     } else {
                       grad_input_row<T, A, false>(g + r * cols, x + r * cols, w, m, s, cols, gx + r * cols);
                     }
                   }
                 });
  }
  if (gw == nullptr && gb == nullptr) return;
  // Blocks of kRowBlock rows sum in A (vectorised), the blocks' sums in double.
  constexpr int64_t kRowBlock = 64;
  parallel_for(0, cols, std::max<int64_t>(8, kGrainSize / std::max<int64_t>(rows, 1)), [&](int64_t begin, int64_t end) {
    const auto n = static_cast<size_t>(end - begin);
    std::vector<double> total_w(n, 0.0), total_b(n, 0.0);
    std::vector<A> block_w(n), block_b(n);
    for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
      std::fill(block_w.begin(), block_w.end(), A(0));
      std::fill(block_b.begin(), block_b.end(), A(0));
      const int64_t r1 = std::min(rows, r0 + kRowBlock);
      if constexpr (std::is_same_v<T, float>) {
        column_sums_float(g, x, mean, rstd, cols, r0, r1, begin, end - begin, block_w.data(), block_b.data());
      } else {
        column_sums<T, A>(g, x, mean, rstd, cols, r0, r1, begin, end - begin, block_w.data(), block_b.data());
      }
      for (size_t c = 0; c < n; ++c)
        total_w[c] += static_cast<double>(block_w[c]), total_b[c] += static_cast<double>(block_b[c]);
    }
    for (int64_t c = begin; c < end; ++c) {
      if (gw != nullptr) gw[c] = convert<T>(total_w[static_cast<size_t>(c - begin)]);
      if (gb != nullptr) gb[c] = convert<T>(total_b[static_cast<size_t>(c - begin)]);
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
