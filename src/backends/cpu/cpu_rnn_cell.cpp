// LstmCell, GruCell and their backward (contracts in kernels/rnn_cell_kernels.h): one pass
// over the {B, H} elements of the state, each from its row of gates.
#include "backends/cpu/cpu_ops.h"
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
  auto over_elements = [&](auto body) {
    parallel_for(0, batch * hidden, kGrainSize / 16, [&](int64_t begin, int64_t end) {
      int64_t b = begin / hidden, j = begin % hidden;
      for (int64_t e = begin; e < end; ++e) {
        body(b, j);
        if (++j == hidden) {
          j = 0;
          ++b;
        }
      }
    });
  };
  switch (call.op) {
    case OpKind::LstmCell:
      return over_elements([&](int64_t b, int64_t j) { lstm_cell_element<T>(b, j, hidden, x[0], x[1], x[2], y[0], y[1], y[2]); });
    case OpKind::LstmCellBackward:
      return over_elements([&](int64_t b, int64_t j) {
        lstm_cell_backward_element<T>(b, j, hidden, x[0], x[1], x[2], x[3], x[4], y[0], y[1]);
      });
    case OpKind::GruCell:
      return over_elements([&](int64_t b, int64_t j) { gru_cell_element<T>(b, j, hidden, x[0], x[1], x[2], y[0], y[1]); });
    default:
      return over_elements([&](int64_t b, int64_t j) {
        gru_cell_backward_element<T>(b, j, hidden, x[0], x[1], y[0], y[1], y[2]);
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
