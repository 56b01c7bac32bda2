// Softmax, LogSoftmax and LogSumExp (Note [Fused logsumexp]) along one dim, numerically stable (the row maximum is
// subtracted before exponentiating; a row of -inf gives NaN, as in PyTorch), accumulating in float (double for double).
//
// Two layouts:
//  - dense rows (the dim has stride 1 in input and output, e.g. softmax over the last
//    dim): each row is reduced and written with straight, vectorisable loops; rows are
//    spread over the thread pool.
//  - otherwise (e.g. softmax over channels of NCHW): the positions along the innermost
//    kept dim are handled a block at a time, walking the softmax dim outermost, so every
//    inner loop runs over neighbouring elements.
// Without trapping math the compiler may evaluate both sides of fast_exp's selects, which
// is what lets the row loops vectorise; ember never reads floating-point exception flags.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/cpu_vector.h"
#include "kernels/fast_exp.h"
#include "kernels/op_name.h"

namespace ember::detail::cpu {
namespace {

template <typename A>
inline A exp_of(A x) {
  if constexpr (std::is_same_v<A, float>) return fast_exp(x);
  else return std::exp(x);
}

template <typename A>
inline A max_of(A a, A b) {  // NaN propagates
  return (a != a || a > b) ? a : b;
}

// Dense float rows, the hot case: max, then exp and sum in eight lanes (a float sum is
// not reassociated by the compiler, lanes let it vectorise), then scale. The max is
// written with GCC's vector types (the compiler does not vectorise the NaN-aware lane
// loop by itself): a plain max per lane plus a NaN flag per lane. Compiled twice,
// for AVX2 machines and for the x86-64 baseline (EMBER_VECTOR_CLONES).

constexpr int kVecLanes = 8;

#if defined(__GNUC__)
typedef float FloatLanes __attribute__((vector_size(kVecLanes * sizeof(float))));
typedef int32_t IntLanes __attribute__((vector_size(kVecLanes * sizeof(int32_t))));

EMBER_VECTOR_CLONES float row_max(const float* in, int64_t n) {
  FloatLanes lanes;
  IntLanes nan = {};
  for (int j = 0; j < kVecLanes; ++j) lanes[j] = -INFINITY;
  int64_t i = 0;
  for (; i + kVecLanes <= n; i += kVecLanes) {
    FloatLanes v;
    std::memcpy(&v, in + i, sizeof(v));
    lanes = v > lanes ? v : lanes;
    nan |= v != v;
  }
  float m = -INFINITY;
  bool any_nan = false;
  for (int j = 0; j < kVecLanes; ++j) m = max_of(m, lanes[j]), any_nan = any_nan || nan[j] != 0;
  if (any_nan) return NAN;  // NaN wins
  for (; i < n; ++i) m = max_of(m, in[i]);
  return m;
}
#else
float row_max(const float* in, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = max_of(m, in[i]);
  return m;
}
#endif

// out[k] = exp(in[k] - m); returns the sum.
EMBER_VECTOR_CLONES float exp_shifted(const float* __restrict in, float* __restrict out, int64_t n, float m) {
  float lanes[kVecLanes] = {};
  int64_t i = 0;
  for (; i + kVecLanes <= n; i += kVecLanes) {
    for (int j = 0; j < kVecLanes; ++j) {
      out[i + j] = fast_exp(in[i + j] - m);
      lanes[j] += out[i + j];
    }
  }
  float sum = 0;
  for (int j = 0; j < kVecLanes; ++j) sum += lanes[j];
  for (; i < n; ++i) sum += (out[i] = fast_exp(in[i] - m));
  return sum;
}

// The sum of exp(in[k] - m) alone (log_softmax).
EMBER_VECTOR_CLONES float exp_shifted_sum(const float* in, int64_t n, float m) {
  float lanes[kVecLanes] = {};
  int64_t i = 0;
  for (; i + kVecLanes <= n; i += kVecLanes) {
    for (int j = 0; j < kVecLanes; ++j) lanes[j] += fast_exp(in[i + j] - m);
  }
  float sum = 0;
  for (int j = 0; j < kVecLanes; ++j) sum += lanes[j];
  for (; i < n; ++i) sum += fast_exp(in[i] - m);
  return sum;
}

// exp_shifted_sum for logsumexp, where the sum is the result: compiled with fused
// multiply-adds on machines that have them (x86-64-v3), which make fast_exp's polynomial
// one instruction a step (softmax and log_softmax keep exp_shifted_sum's rounding).
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
EMBER_FMA_CLONES float exp_shifted_sum_fma(const float* in, int64_t n, float m) {
  float lanes[kVecLanes] = {};
  int64_t i = 0;
  for (; i + kVecLanes <= n; i += kVecLanes) {
    for (int j = 0; j < kVecLanes; ++j) lanes[j] += fast_exp(in[i + j] - m);
  }
  float sum = 0;
  for (int j = 0; j < kVecLanes; ++j) sum += lanes[j];
  for (; i < n; ++i) sum += fast_exp(in[i] - m);
  return sum;
}
#pragma GCC pop_options

EMBER_VECTOR_CLONES void scale_row(float* out, int64_t n, float scale) {
  for (int64_t k = 0; k < n; ++k) out[k] *= scale;
}

EMBER_VECTOR_CLONES void shift_row(const float* in, float* out, int64_t n, float m, float log_sum) {
  for (int64_t k = 0; k < n; ++k) out[k] = (in[k] - m) - log_sum;
}

// One dense row of n elements.
template <typename T, bool kLog>
void softmax_row(const T* in, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    const float m = row_max(in, n);
    if constexpr (kLog) {
      shift_row(in, out, n, m, std::log(exp_shifted_sum(in, n, m)));
    } else {
      scale_row(out, n, 1.0f / exp_shifted(in, out, n, m));
    }
    return;
  }
  using A = compute_t<T>;
  constexpr int kLanes = 16;
  A lanes[kLanes];
  for (int j = 0; j < kLanes; ++j) lanes[j] = -INFINITY;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] = max_of(lanes[j], convert<A>(in[i + j]));
  }
  A m = -INFINITY;
  for (int j = 0; j < kLanes; ++j) m = max_of(m, lanes[j]);
  for (; i < n; ++i) m = max_of(m, convert<A>(in[i]));
  A sum = 0;
  if constexpr (kLog) {
    for (int64_t k = 0; k < n; ++k) sum += exp_of<A>(convert<A>(in[k]) - m);
    // (x - max) - log(sum), not x - (max + log(sum)): the latter rounds at max's magnitude.
    const A log_sum = std::log(sum);
#pragma GCC ivdep
    for (int64_t k = 0; k < n; ++k) out[k] = convert<T>((convert<A>(in[k]) - m) - log_sum);
  } else if constexpr (std::is_same_v<T, A>) {
#pragma GCC ivdep
    for (int64_t k = 0; k < n; ++k) out[k] = exp_of<A>(in[k] - m);
    for (int64_t k = 0; k < n; ++k) sum += out[k];
    const A scale = A(1) / sum;
#pragma GCC ivdep
    for (int64_t k = 0; k < n; ++k) out[k] *= scale;
  } else {
    for (int64_t k = 0; k < n; ++k) sum += exp_of<A>(convert<A>(in[k]) - m);
    const A scale = A(1) / sum;
    for (int64_t k = 0; k < n; ++k) out[k] = convert<T>(exp_of<A>(convert<A>(in[k]) - m) * scale);
  }
}

// `count` positions (byte strides in_step/out_step between them), each a softmax over
// `n` elements `in_dim`/`out_dim` bytes apart.
template <typename T, bool kLog>
void softmax_columns(const char* in, char* out, int64_t count, int64_t in_step, int64_t out_step, int64_t n,
                     int64_t in_dim, int64_t out_dim) {
  using A = compute_t<T>;
  for (int64_t start = 0; start < count; start += kBlock) {
    const int m = static_cast<int>(std::min<int64_t>(kBlock, count - start));
    const char* ib = in + start * in_step;
    char* ob = out + start * out_step;
    A mx[kBlock], sum[kBlock];
    for (int j = 0; j < m; ++j) mx[j] = -INFINITY, sum[j] = 0;
    for (int64_t d = 0; d < n; ++d) {
      const char* row = ib + d * in_dim;
      for (int j = 0; j < m; ++j) mx[j] = max_of(mx[j], convert<A>(*reinterpret_cast<const T*>(row + j * in_step)));
    }
    for (int64_t d = 0; d < n; ++d) {
      const char* row = ib + d * in_dim;
      for (int j = 0; j < m; ++j)
        sum[j] += exp_of<A>(convert<A>(*reinterpret_cast<const T*>(row + j * in_step)) - mx[j]);
    }
    for (int j = 0; j < m; ++j) sum[j] = kLog ? std::log(sum[j]) : A(1) / sum[j];
    for (int64_t d = 0; d < n; ++d) {
      const char* row = ib + d * in_dim;
      char* orow = ob + d * out_dim;
      for (int j = 0; j < m; ++j) {
        const A x = convert<A>(*reinterpret_cast<const T*>(row + j * in_step));
        *reinterpret_cast<T*>(orow + j * out_step) =
            convert<T>(kLog ? (x - mx[j]) - sum[j] : exp_of<A>(x - mx[j]) * sum[j]);
      }
    }
  }
}

// Note [Fused logsumexp]
// logsumexp along one dim is softmax's first two passes: the maximum (row_max), then the
// sum of exp(x - max) (exp_shifted_sum, fast_exp in lanes), and log(sum) + max per line,
// in one launch instead of max, exp, sum and log. An infinite maximum counts as 0, so
// all -inf gives -inf and +inf gives +inf (PyTorch); a NaN maximum makes the sum NaN.
template <typename A>
inline A finite_or_zero(A m) {
  return (m == A(INFINITY) || m == A(-INFINITY)) ? A(0) : m;
}

template <typename T>
compute_t<T> logsumexp_row(const T* in, int64_t n) {
  using A = compute_t<T>;
  if constexpr (std::is_same_v<T, float>) {
    const float m = finite_or_zero(row_max(in, n));
    return std::log(exp_shifted_sum_fma(in, n, m)) + m;
  } else {
    A m = -INFINITY;
    for (int64_t k = 0; k < n; ++k) m = max_of(m, convert<A>(in[k]));
    m = finite_or_zero(m);
    A sum = 0;
    for (int64_t k = 0; k < n; ++k) sum += exp_of<A>(convert<A>(in[k]) - m);
    return std::log(sum) + m;
  }
}

// `count` positions (byte strides in_step/out_step), each reducing `n` elements `in_dim`
// bytes apart, a block of positions at a time as softmax_columns.
template <typename T>
void logsumexp_columns(const char* in, char* out, int64_t count, int64_t in_step, int64_t out_step, int64_t n,
                       int64_t in_dim) {
  using A = compute_t<T>;
  for (int64_t start = 0; start < count; start += kBlock) {
    const int m = static_cast<int>(std::min<int64_t>(kBlock, count - start));
    const char* ib = in + start * in_step;
    A mx[kBlock], sum[kBlock];
    for (int j = 0; j < m; ++j) mx[j] = -INFINITY, sum[j] = 0;
    for (int64_t d = 0; d < n; ++d) {
      const char* row = ib + d * in_dim;
      for (int j = 0; j < m; ++j) mx[j] = max_of(mx[j], convert<A>(*reinterpret_cast<const T*>(row + j * in_step)));
    }
    for (int j = 0; j < m; ++j) mx[j] = finite_or_zero(mx[j]);
    for (int64_t d = 0; d < n; ++d) {
      const char* row = ib + d * in_dim;
      for (int j = 0; j < m; ++j)
        sum[j] += exp_of<A>(convert<A>(*reinterpret_cast<const T*>(row + j * in_step)) - mx[j]);
    }
    for (int j = 0; j < m; ++j) {
      *reinterpret_cast<T*>(out + (start + j) * out_step) = convert<T>(std::log(sum[j]) + mx[j]);
    }
  }
}

template <typename T>
void logsumexp_typed(const TensorArg& out, const TensorArg& in, int64_t dim) {
  const int64_t n = in.sizes.empty() ? 1 : in.sizes[dim];
  const int64_t bytes = sizeof(T);
  const int64_t in_dim = in.sizes.empty() ? 0 : in.strides[dim] * bytes;
  TensorArg in_kept = in, out_kept = out;  // out's dim already has size 1
  if (!in.sizes.empty()) in_kept.sizes[dim] = 1;
  LoopShape s = make_loop_shape({&out_kept, &in_kept}, /*reorder=*/true);
  if (s.numel == 0) return;
  char* base[] = {static_cast<char*>(out.data), static_cast<char*>(in.data)};
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1));
  if (in_dim == bytes || n <= 1) {
    parallel_loop(
        s, base,
        [n](char* const* p, const int64_t* st, int64_t count) {
          for (int64_t i = 0; i < count; ++i) {
            *reinterpret_cast<T*>(p[0] + i * st[0]) =
                convert<T>(logsumexp_row(reinterpret_cast<const T*>(p[1] + i * st[1]), n));
          }
        },
        grain);
    return;
  }
  parallel_loop(
      s, base,
      [=](char* const* p, const int64_t* st, int64_t count) {
        logsumexp_columns<T>(p[1], p[0], count, st[1], st[0], n, in_dim);
      },
      grain);
}

template <typename T, bool kLog>
void softmax_typed(const TensorArg& out, const TensorArg& in, int64_t dim) {
  const int64_t n = in.sizes.empty() ? 1 : in.sizes[dim];
  if (in.numel() == 0) return;
  const int64_t bytes = sizeof(T);
  const int64_t in_dim = in.sizes.empty() ? 0 : in.strides[dim] * bytes;
  const int64_t out_dim = out.sizes.empty() ? 0 : out.strides[dim] * bytes;
  // The kept positions: both operands with the softmax dim collapsed to size 1.
  TensorArg in_kept = in, out_kept = out;
  if (!in.sizes.empty()) in_kept.sizes[dim] = out_kept.sizes[dim] = 1;
  LoopShape s = make_loop_shape({&out_kept, &in_kept}, /*reorder=*/true);
  char* base[] = {static_cast<char*>(out.data), static_cast<char*>(in.data)};
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1));
  if ((in_dim == bytes || n == 1) && (out_dim == bytes || n == 1)) {
    parallel_loop(
        s, base,
        [n](char* const* p, const int64_t* st, int64_t count) {
          for (int64_t i = 0; i < count; ++i) {
            softmax_row<T, kLog>(reinterpret_cast<const T*>(p[1] + i * st[1]), reinterpret_cast<T*>(p[0] + i * st[0]),
                                 n);
          }
        },
        grain);
    return;
  }
  parallel_loop(
      s, base,
      [=](char* const* p, const int64_t* st, int64_t count) {
        softmax_columns<T, kLog>(p[1], p[0], count, st[1], st[0], n, in_dim, out_dim);
      },
      grain);
}

}  // namespace

void run_softmax(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1 && call.inputs.size() == 1, ValueError, op_name(call.op),
              ": expected 1 output and 1 input");
  const TensorArg &out = call.outputs[0], &in = call.inputs[0];
  expect_dtype(op_name(call.op), out, in.dtype);
  const bool log = call.op == OpKind::LogSoftmax;
  const int64_t nd = static_cast<int64_t>(in.sizes.size());
  const int64_t dim = call.arg<kargs::Dim>().dim;
  EMBER_CHECK(dim >= 0 && dim < std::max<int64_t>(nd, 1), IndexError, op_name(call.op), ": bad dim ", dim);
  dispatch(in.dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (!is_floating_v<T>) {
      not_implemented(log ? "log_softmax_lastdim_kernel_impl" : "softmax_lastdim_kernel_impl", in.dtype);
    } else if (log) {
      softmax_typed<T, true>(out, in, dim);
    } else {
      softmax_typed<T, false>(out, in, dim);
    }
  });
}

void run_logsumexp(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1 && call.inputs.size() == 1, ValueError,
              "logsumexp: expected 1 output and 1 input");
  const TensorArg &out = call.outputs[0], &in = call.inputs[0];
  expect_dtype("logsumexp", out, in.dtype);
  const int64_t nd = static_cast<int64_t>(in.sizes.size());
  const int64_t dim = call.arg<kargs::Dim>().dim;
  EMBER_CHECK(dim >= 0 && dim < std::max<int64_t>(nd, 1), IndexError, "logsumexp: bad dim ", dim);
  dispatch(in.dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (!is_floating_v<T>) not_implemented("logsumexp", in.dtype);
    else logsumexp_typed<T>(out, in, dim);
  });
}

}  // namespace ember::detail::cpu
