// DriverBackend::launch: the driver's end of Note [One launch choke point]. Every op
// arrives here as a KernelCall and leaves as CUDA kernel launches on one stream.
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_extensions.h"
#include "backends/cuda/cuda_ops.h"

namespace ember::detail::driver {

void DriverBackend::launch(BackendStream* stream, const KernelCall& call) {
  DriverStream& s = as_driver(stream);
  DeviceScope scope(s.device);
  cudaStream_t handle = s.handle;
  if (call.op == OpKind::Copy && call.outputs.at(0).data != nullptr && call.inputs.at(0).data != nullptr) {
    // A strided copy between two devices runs as a kernel on the stream's device that
    // reads or writes the other device's memory (UVA): that needs peer access.
    int dst = pointer_device(call.outputs.at(0).data), src = pointer_device(call.inputs.at(0).data);
    if (dst >= 0 && src >= 0 && dst != src) enable_peer_access(dst, src);
  }
  switch (call.op) {
    case OpKind::Copy: launch_copy(call, handle); break;
    case OpKind::Fill: launch_fill(call, handle); break;
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Pow:
      launch_binary(call, handle);
      break;
    case OpKind::AddScalar: case OpKind::MulScalar: case OpKind::PowScalar: case OpKind::RSubScalar:
    case OpKind::RDivScalar:
      launch_scalar_op(call, handle);
      break;
    case OpKind::Eq: case OpKind::Ne: case OpKind::Lt: case OpKind::Le: case OpKind::Gt: case OpKind::Ge:
    case OpKind::IsClose:
      launch_compare(call, handle);
      break;
    case OpKind::Neg: case OpKind::Abs: case OpKind::Relu:
    EMBER_FLOAT_UNARY_OPS(EMBER_FLOAT_UNARY_CASE)
      launch_unary(call, handle);
      break;
    case OpKind::Sum: case OpKind::Mean: case OpKind::Max: case OpKind::Min: case OpKind::All:
      launch_reduce(call, handle);
      break;
    case OpKind::Matmul: launch_matmul(call, handle); break;
    case OpKind::IndexSelect: launch_index_select(call, handle); break;
    case OpKind::Normal: case OpKind::Uniform: case OpKind::Arange:
      launch_generate(call, handle);
      break;
    case OpKind::Where: case OpKind::Clamp: case OpKind::ClampScalar: launch_select(call, handle); break;
    case OpKind::Softmax: case OpKind::LogSoftmax: launch_softmax(call, handle); break;
    case OpKind::ArgMax: case OpKind::ArgMin: launch_arg_reduce(call, handle); break;
    case OpKind::MaxPool2d: case OpKind::AvgPool2d: launch_pool(call, handle); break;
    case OpKind::MaxPool2dBackward: launch_max_pool_backward(call, handle); break;
    case OpKind::NllLoss: launch_nll_loss(call, handle); break;
    case OpKind::BatchNormStats: launch_batch_norm_stats(call, handle); break;
    case OpKind::FFT:
      run_fft(call, handle);
      check_launch(handle);
      break;
    case OpKind::Im2Col:
      run_im2col(call, handle);
      check_launch(handle);
      break;
    case OpKind::Col2Im:
      run_col2im(call, handle);
      check_launch(handle);
      break;
    case OpKind::OptimizerStep: launch_optimizer_step(call, handle); break;
    case OpKind::Cumsum: launch_cumsum(call, handle); break;
    case OpKind::Sort: launch_sort(call, handle); break;
    case OpKind::Gather: case OpKind::ScatterAdd: launch_scatter(call, handle); break;
    case OpKind::Multinomial: launch_multinomial(call, handle); break;
    case OpKind::IndexAdd: launch_index_add(call, handle); break;
    case OpKind::LayerNorm: launch_layer_norm(call, handle); break;
    case OpKind::LayerNormBackward: launch_layer_norm_backward(call, handle); break;
    case OpKind::Gelu: case OpKind::GeluBackward: launch_gelu(call, handle); break;
    case OpKind::ForeachMul: launch_foreach_mul(call, handle); break;
    case OpKind::AmpNonFiniteCheckAndUnscale: launch_amp_check_and_unscale(call, handle); break;
    case OpKind::AmpUpdateScale: launch_amp_update_scale(call, handle); break;
    case OpKind::LogSumExp: launch_logsumexp(call, handle); break;
    case OpKind::Triangle: launch_triangle(call, handle); break;
    case OpKind::LstmCell: case OpKind::LstmCellBackward: case OpKind::GruCell: case OpKind::GruCellBackward:
      launch_rnn_cell(call, handle);
      break;
    case OpKind::GridSample: case OpKind::GridSampleBackward: launch_grid_sample(call, handle); break;
  }
}

}  // namespace ember::detail::driver
