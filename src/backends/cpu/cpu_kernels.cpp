// cpu::run: the host executor's entry point, a switch over OpKind.
#include "backends/cpu/cpu_kernels.h"

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "ember/errors.h"
#include "kernels/dtype_dispatch.h"

namespace ember::detail::cpu {

void not_implemented(const char* name, DType dtype) {
  fail<TypeError>("\"", name, "\" not implemented for '", scalar_type_name(dtype), "'");
}

void expect_dtype(const char* name, const TensorArg& arg, DType expected) {
  EMBER_CHECK(arg.dtype == expected, TypeError, name, ": expected a tensor of dtype '",
              scalar_type_name(expected), "' but got '", scalar_type_name(arg.dtype), "'");
}

void check_no_zero_divisor(const TensorArg& divisor) {
  dispatch(divisor.dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (std::is_integral_v<T>) {
      LoopShape s = make_loop_shape({&divisor}, /*reorder=*/true);
      char* base[] = {static_cast<char*>(divisor.data)};
      bool zero = false;
      auto scan = [&](char* const* p, const int64_t* st, int64_t n) {
        for (int64_t i = 0; i < n; ++i) zero = zero || *reinterpret_cast<const T*>(p[0] + i * st[0]) == T(0);
      };
      for_each_row(s, base, 0, s.numel, scan);
      EMBER_CHECK(!zero, ValueError, "ZeroDivisionError");
    }
  });
}

void run(const KernelCall& call) {
  switch (call.op) {
    case OpKind::Copy: return run_copy(call);
    case OpKind::Fill: return run_fill(call);
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Pow:
    case OpKind::Eq: case OpKind::Ne: case OpKind::Lt: case OpKind::Le: case OpKind::Gt: case OpKind::Ge:
    case OpKind::IsClose:
      return run_binary(call);
    case OpKind::AddScalar: case OpKind::MulScalar: case OpKind::PowScalar: case OpKind::RSubScalar:
    case OpKind::RDivScalar: case OpKind::Neg: case OpKind::Abs: case OpKind::Relu:
    EMBER_FLOAT_UNARY_OPS(EMBER_FLOAT_UNARY_CASE)
      return run_unary(call);
    case OpKind::Sum: case OpKind::Mean: case OpKind::Max: case OpKind::Min: case OpKind::All:
      return run_reduce(call);
    case OpKind::Matmul: return run_matmul(call);
    case OpKind::IndexSelect: return run_index_select(call);
    case OpKind::Normal: case OpKind::Uniform: case OpKind::Arange: return run_random(call);
    case OpKind::Where: case OpKind::Clamp: case OpKind::ClampScalar: return run_select(call);
    case OpKind::Softmax: case OpKind::LogSoftmax: return run_softmax(call);
    case OpKind::ArgMax: case OpKind::ArgMin: return run_arg_reduce(call);
    case OpKind::MaxPool2d: case OpKind::AvgPool2d: return run_pool(call);
    case OpKind::MaxPool2dBackward: return run_max_pool_backward(call);
    case OpKind::NllLoss: return run_nll_loss(call);
    case OpKind::BatchNormStats: return run_batch_norm_stats(call);
    case OpKind::FFT: return run_fft(call);
    case OpKind::Im2Col: return run_im2col(call);
    case OpKind::Col2Im: return run_col2im(call);
    case OpKind::OptimizerStep: return run_optimizer_step(call);
    case OpKind::Cumsum: return run_cumsum(call);
    case OpKind::Sort: return run_sort(call);
    case OpKind::Gather: case OpKind::ScatterAdd: return run_scatter(call);
    case OpKind::Multinomial: return run_multinomial(call);
    case OpKind::IndexAdd: return run_index_add(call);
    case OpKind::LayerNorm: return run_layer_norm(call);
    case OpKind::LayerNormBackward: return run_layer_norm_backward(call);
    case OpKind::Gelu: case OpKind::GeluBackward: return run_gelu(call);
    case OpKind::ForeachMul: return run_foreach_mul(call);
    case OpKind::AmpNonFiniteCheckAndUnscale: return run_amp_check_and_unscale(call);
    case OpKind::AmpUpdateScale: return run_amp_update_scale(call);
    case OpKind::LogSumExp: return run_logsumexp(call);
    case OpKind::Triangle: return run_triangle(call);
    case OpKind::LstmCell: case OpKind::LstmCellBackward: case OpKind::GruCell: case OpKind::GruCellBackward:
      return run_rnn_cell(call);
    case OpKind::GridSample: case OpKind::GridSampleBackward: return run_grid_sample(call);
  }
  fail<ValueError>("cpu::run: unknown op kind ", static_cast<int>(call.op));
}

}  // namespace ember::detail::cpu
