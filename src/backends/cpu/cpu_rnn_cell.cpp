// LstmCell, GruCell and their backward (contracts in kernels/rnn_cell_kernels.h): one pass
// over the {B, H} elements of the state, each from its row of gates, in runs of one row.
//
// Float runs call the element bodies with the vectorisable sigmoid and tanh of
// cpu_vec_activations.h (within 3 ulp of std::'s; libm's scalar calls were a fifth of an
// LSTM's training step) in loops compiled for AVX2 and the baseline (EMBER_VECTOR_CLONES);
// float64 keeps the std:: functions. Without trapping math the compiler may evaluate both
// sides of the activations' selects, which is what lets the loops vectorise (as in
// cpu_softmax.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <algorithm>
#include <type_traits>

#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/cpu_vec_activations.h"
#include "backends/cpu/cpu_vector.h"
#include "kernels/parallel.h"
#include "kernels/rnn_cell_kernels.h"

namespace ember::detail::cpu {
namespace {

template <typename T>
const T* in(const KernelCall& call, size_t k) {
  return static_cast<const T*>(call.inputs.at(k).data);
}
template <typename T>
T* out(const KernelCall& call, size_t k) {
  return static_cast<T*>(call.outputs.at(k).data);
}

// Elements [j0, j1) of row b, float, the element bodies inlined (flatten) so that each loop
// vectorises across j.
using Act = VecCellActivations;
EMBER_VECTOR_CLONES __attribute__((flatten)) void lstm_run(int64_t b, int64_t j0, int64_t j1, int64_t H,
                                                           const float* __restrict igates,
                                                           const float* __restrict hgates, const float* __restrict cx,
                                                           float* __restrict hy, float* __restrict cy,
                                                           float* __restrict workspace) {
  for (int64_t j = j0; j < j1; ++j) lstm_cell_element<float, Act>(b, j, H, igates, hgates, cx, hy, cy, workspace);
}
EMBER_VECTOR_CLONES __attribute__((flatten)) void lstm_backward_run(
    int64_t b, int64_t j0, int64_t j1, int64_t H, const float* __restrict grad_hy, const float* __restrict grad_cy,
    const float* __restrict cx, const float* __restrict cy, const float* __restrict workspace,
    float* __restrict grad_gates, float* __restrict grad_cx) {
  for (int64_t j = j0; j < j1; ++j) {
    lstm_cell_backward_element<float, Act>(b, j, H, grad_hy, grad_cy, cx, cy, workspace, grad_gates, grad_cx);
  }
}
EMBER_VECTOR_CLONES __attribute__((flatten)) void gru_run(int64_t b, int64_t j0, int64_t j1, int64_t H,
                                                          const float* __restrict igates,
                                                          const float* __restrict hgates, const float* __restrict hx,
                                                          float* __restrict hy, float* __restrict workspace) {
  for (int64_t j = j0; j < j1; ++j) gru_cell_element<float, Act>(b, j, H, igates, hgates, hx, hy, workspace);
}

template <typename T>
void run_typed(const KernelCall& call) {
  // The state's shape {B, H}: the forwards' first output (hy), the backwards' first input
  // (the gradient of hy).
  const bool backward = call.op == OpKind::LstmCellBackward || call.op == OpKind::GruCellBackward;
  const TensorArg& state = backward ? call.inputs.at(0) : call.outputs.at(0);
  const int64_t batch = state.sizes.at(0), hidden = state.sizes.at(1);
  const T* x[5] = {};
  T* y[3] = {};
  for (size_t k = 0; k < call.inputs.size() && k < 5; ++k) x[k] = in<T>(call, k);
  for (size_t k = 0; k < call.outputs.size() && k < 3; ++k) y[k] = out<T>(call, k);
  // Each element runs a few transcendental functions: a smaller grain than the plain maps'.
  // body(b, j0, j1) runs elements [j0, j1) of row b.
  auto over_runs = [&](auto body) {
    parallel_for(0, batch * hidden, kGrainSize / 16, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end;) {
        const int64_t b = e / hidden, j0 = e % hidden, j1 = std::min(hidden, j0 + end - e);
        body(b, j0, j1);
        e += j1 - j0;
      }
    });
  };
  constexpr bool kFloat = std::is_same_v<T, float>;
  switch (call.op) {
    case OpKind::LstmCell:
      return over_runs([&](int64_t b, int64_t j0, int64_t j1) {
        if constexpr (kFloat) return lstm_run(b, j0, j1, hidden, x[0], x[1], x[2], y[0], y[1], y[2]);
        for (int64_t j = j0; j < j1; ++j) lstm_cell_element<T>(b, j, hidden, x[0], x[1], x[2], y[0], y[1], y[2]);
      });
    case OpKind::LstmCellBackward:
      return over_runs([&](int64_t b, int64_t j0, int64_t j1) {
        if constexpr (kFloat) return lstm_backward_run(b, j0, j1, hidden, x[0], x[1], x[2], x[3], x[4], y[0], y[1]);
        for (int64_t j = j0; j < j1; ++j) {
          lstm_cell_backward_element<T>(b, j, hidden, x[0], x[1], x[2], x[3], x[4], y[0], y[1]);
        }
      });
    case OpKind::GruCell:
      return over_runs([&](int64_t b, int64_t j0, int64_t j1) {
        if constexpr (kFloat) return gru_run(b, j0, j1, hidden, x[0], x[1], x[2], y[0], y[1]);
        for (int64_t j = j0; j < j1; ++j) gru_cell_element<T>(b, j, hidden, x[0], x[1], x[2], y[0], y[1]);
      });
    default:  // GruCellBackward: no transcendental functions; vectorised as it is
      return over_runs([&](int64_t b, int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) gru_cell_backward_element<T>(b, j, hidden, x[0], x[1], y[0], y[1], y[2]);
      });
  }
}

}  // namespace

void run_rnn_cell(const KernelCall& call) {
  const DType dtype = call.outputs.at(0).dtype;
  if (dtype == kFloat32) return run_typed<float>(call);
  if (dtype == kFloat64) return run_typed<double>(call);
  not_implemented(call.op == OpKind::LstmCell || call.op == OpKind::LstmCellBackward ? "_thnn_fused_lstm_cell"
                                                                                     : "_thnn_fused_gru_cell",
                  dtype);
}

}  // namespace ember::detail::cpu
