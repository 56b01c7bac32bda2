// Gelu and GeluBackward (contracts in kernels/transformer_kernels.h): element-wise maps.
//
// Float, float16 and bfloat16 (computed in float) use host bodies that the compiler
// vectorises, as PyTorch's CPU kernels do: erf by Abramowitz and Stegun 7.1.26 (absolute
// error below 1.5e-7, PyTorch's Vectorized<float>::erf), exp by fast_exp, and tanh(u) as
// 1 - 2 / (exp(2u) + 1). Float64 uses the shared functors (std::erf, std::tanh), as the
// driver does for every dtype. Dense float operands run in loops compiled for AVX2 and the
// baseline (EMBER_VECTOR_CLONES); other layouts go through the iteration engine. Without trapping math the compiler may
// evaluate both sides of the selects, which lets the loops vectorise (as in cpu_softmax.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/cpu_vector.h"
#include "kernels/fast_exp.h"
#include "kernels/transformer_kernels.h"

namespace ember::detail::cpu {
namespace {

inline float erf_approx(float x) {
  const float a = x < 0 ? -x : x;
  const float t = 1.0f / (0.3275911f * a + 1.0f);
  const float r = (((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f;
  const float e = 1.0f - r * t * fast_exp(-x * x);
  return x < 0 ? -e : e;
}

inline float tanh_approx(float u) {
  const float c = u > 20.0f ? 20.0f : (u < -20.0f ? -20.0f : u);  // tanh is +-1 in float past 20
  return 1.0f - 2.0f / (fast_exp(2.0f * c) + 1.0f);
}

constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kKappa = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

struct GeluFloat {
  float operator()(float x) const { return x * 0.5f * (1.0f + erf_approx(x * kInvSqrt2)); }
};
struct GeluTanhFloat {
  float operator()(float x) const { return 0.5f * x * (1.0f + tanh_approx(kBeta * (x + kKappa * x * x * x))); }
};
struct GeluBackwardFloat {
  float operator()(float g, float x) const {
    const float cdf = 0.5f * (1.0f + erf_approx(x * kInvSqrt2));
    const float pdf = fast_exp(-0.5f * x * x) * kInvSqrt2Pi;
    return g * (cdf + x * pdf);
  }
};
struct GeluTanhBackwardFloat {
  float operator()(float g, float x) const {
    const float x_sq = x * x;
    const float u = kBeta * (x + kKappa * x_sq * x);
    const bool saturated = u > 20.0f || u < -20.0f;
    const float e = fast_exp(2.0f * (u > 20.0f ? 20.0f : (u < -20.0f ? -20.0f : u)));  // (e + 1)^2 stays finite
    const float t = 1.0f - 2.0f / (e + 1.0f);
    // 1 - t * t, without its cancellation; 0 where tanh is +-1 in float, as PyTorch's
    // 1 - tanh^2 there (the clamped e would give sech^2(20) instead: x * sech^2 * x^2 grows
    // with x, and x = -inf would give -inf where PyTorch gives inf * 0 = NaN).
    const float sech_sq = saturated ? 0.0f : 4.0f * e / ((e + 1.0f) * (e + 1.0f));
    const float left_derivative = 0.5f * (1.0f + t);
    const float right_derivative = 0.5f * x * sech_sq * kBeta * (1.0f + 3.0f * kKappa * x_sq);
    return g * (left_derivative + right_derivative);
  }
};

EMBER_VECTOR_CLONES void gelu_dense(const float* x, float* y, int64_t n, bool tanh) {
  if (tanh) {
    for (int64_t k = 0; k < n; ++k) y[k] = GeluTanhFloat{}(x[k]);
  } else {
    for (int64_t k = 0; k < n; ++k) y[k] = GeluFloat{}(x[k]);
  }
}

EMBER_VECTOR_CLONES void gelu_backward_dense(const float* g, const float* x, float* out, int64_t n, bool tanh) {
  if (tanh) {
    for (int64_t k = 0; k < n; ++k) out[k] = GeluTanhBackwardFloat{}(g[k], x[k]);
  } else {
    for (int64_t k = 0; k < n; ++k) out[k] = GeluBackwardFloat{}(g[k], x[k]);
  }
}

// Row-major contiguous (size-1 dims aside).
bool dense(const TensorArg& a) {
  int64_t expected = 1;
  for (size_t d = a.sizes.size(); d-- > 0;) {
    if (a.sizes[d] == 1) continue;
    if (a.strides[d] != expected) return false;
    expected *= a.sizes[d];
  }
  return true;
}

template <typename T>
void gelu_typed(const KernelCall& call) {
  const TensorArg& out = call.outputs.at(0);
  const bool forward = call.op == OpKind::Gelu;
  const bool use_tanh = call.arg<kargs::Gelu>().tanh;
  if constexpr (std::is_same_v<T, float>) {
    const bool all_dense = dense(out) && dense(call.inputs.at(0)) && (forward || dense(call.inputs.at(1)));
    if (all_dense) {
      auto* y = static_cast<float*>(out.data);
      const auto* a = static_cast<const float*>(call.inputs[0].data);
      const auto* b = forward ? nullptr : static_cast<const float*>(call.inputs[1].data);
      parallel_for(0, out.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
        if (forward) gelu_dense(a + begin, y + begin, end - begin, use_tanh);
        else gelu_backward_dense(a + begin, b + begin, y + begin, end - begin, use_tanh);
      });
      return;
    }
  }
  if constexpr (std::is_same_v<compute_t<T>, float>) {
    if (forward) {
      if (use_tanh) map_unary<T, T>(out, call.inputs.at(0), GeluTanhFloat{});
      else map_unary<T, T>(out, call.inputs.at(0), GeluFloat{});
    } else {
      if (use_tanh) map_binary<T, T>(out, call.inputs.at(0), call.inputs.at(1), GeluTanhBackwardFloat{});
      else map_binary<T, T>(out, call.inputs.at(0), call.inputs.at(1), GeluBackwardFloat{});
    }
  } else {
    using C = compute_t<T>;
    if (forward) map_unary<T, T>(out, call.inputs.at(0), GeluFn<C>{use_tanh});
    else map_binary<T, T>(out, call.inputs.at(0), call.inputs.at(1), GeluBackwardFn<C>{use_tanh});
  }
}

}  // namespace

void run_gelu(const KernelCall& call) {
  const TensorArg& out = call.outputs.at(0);
  dispatch(out.dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (!is_floating_v<T>) {
      not_implemented(call.op == OpKind::Gelu ? "GeluKernelImpl" : "GeluBackwardKernelImpl", out.dtype);
    } else {
      gelu_typed<T>(call);
    }
  });
}

}  // namespace ember::detail::cpu
