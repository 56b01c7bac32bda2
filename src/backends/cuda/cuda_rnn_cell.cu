// LstmCell, GruCell and their backward on the driver backend (contracts in
// kernels/rnn_cell_kernels.h): one thread per element of the {B, H} state, running the body
// the cpu runs (cpu_rnn_cell.cpp), in a grid-stride loop.
#include "backends/cuda/cuda_loops.cuh"
#include "kernels/rnn_cell_kernels.h"

namespace ember::detail::driver {
namespace {

// Up to five inputs and three outputs, as raw pointers of the call's dtype.
template <typename T>
struct CellOperands {
  const T* in[5];
  T* out[3];
};

template <typename T>
__global__ void rnn_cell_kernel(OpKind op, int64_t elements, int64_t hidden, CellOperands<T> p) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < elements; e += stride) {
    const int64_t b = e / hidden, j = e % hidden;
    if (op == OpKind::LstmCell) {
      lstm_cell_element<T>(b, j, hidden, p.in[0], p.in[1], p.in[2], p.out[0], p.out[1], p.out[2]);
    } else if (op == OpKind::LstmCellBackward) {
      lstm_cell_backward_element<T>(b, j, hidden, p.in[0], p.in[1], p.in[2], p.in[3], p.in[4], p.out[0], p.out[1]);
    } else if (op == OpKind::GruCell) {
      gru_cell_element<T>(b, j, hidden, p.in[0], p.in[1], p.in[2], p.out[0], p.out[1]);
    } else {
      gru_cell_backward_element<T>(b, j, hidden, p.in[0], p.in[1], p.out[0], p.out[1], p.out[2]);
    }
  }
}

}  // namespace

void launch_rnn_cell(const KernelCall& call, cudaStream_t stream) {
  // The state's shape {B, H}: the forwards' first output (hy), the backwards' first input
  // (the gradient of hy).
  const bool backward = call.op == OpKind::LstmCellBackward || call.op == OpKind::GruCellBackward;
  const TensorArg& state = backward ? call.inputs.at(0) : call.outputs.at(0);
  const int64_t elements = state.sizes.at(0) * state.sizes.at(1), hidden = state.sizes.at(1);
  if (elements == 0) return;
  const DType dtype = call.outputs.at(0).dtype;
  EMBER_CHECK(dtype == kFloat32 || dtype == kFloat64, TypeError, "\"",
              call.op == OpKind::LstmCell || call.op == OpKind::LstmCellBackward ? "_thnn_fused_lstm_cell_cuda"
                                                                                 : "_thnn_fused_gru_cell_cuda",
              "\" not implemented for '", scalar_type_name(dtype), "'");
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    CellOperands<T> p{};
    for (size_t k = 0; k < call.inputs.size() && k < 5; ++k) p.in[k] = static_cast<const T*>(call.inputs[k].data);
    for (size_t k = 0; k < call.outputs.size() && k < 3; ++k) p.out[k] = static_cast<T*>(call.outputs[k].data);
    rnn_cell_kernel<T><<<grid_blocks(elements), kThreads, 0, stream>>>(call.op, elements, hidden, p);
  };
  if (dtype == kFloat32) run(TypeTag<float>{});
  else run(TypeTag<double>{});
  check_launch(stream);
}

}  // namespace ember::detail::driver
