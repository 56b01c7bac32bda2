#include "kernels/op_name.h"

namespace ember::detail {

const char* op_name(OpKind op) noexcept {
  switch (op) {
    case OpKind::Copy: return "copy_";
    case OpKind::Fill: return "fill_";
    case OpKind::Add: case OpKind::AddScalar: return "add";
    case OpKind::Sub: return "sub";
    case OpKind::RSubScalar: return "rsub";
    case OpKind::Mul: case OpKind::MulScalar: return "mul";
    case OpKind::Div: case OpKind::RDivScalar: return "div";
    case OpKind::Pow: case OpKind::PowScalar: return "pow";
    case OpKind::Eq: return "eq";
    case OpKind::Ne: return "ne";
    case OpKind::Lt: return "lt";
    case OpKind::Le: return "le";
    case OpKind::Gt: return "gt";
    case OpKind::Ge: return "ge";
    case OpKind::Neg: return "neg";
    case OpKind::Abs: return "abs";
    case OpKind::Relu: return "relu";
#define EMBER_OP_NAME(Kind, name, ...) \
  case OpKind::Kind: return #name;
    EMBER_FLOAT_UNARY_OPS(EMBER_OP_NAME)
#undef EMBER_OP_NAME
    case OpKind::IsClose: return "isclose";
    case OpKind::Sum: return "sum";
    case OpKind::Mean: return "mean";
    case OpKind::Max: return "max";
    case OpKind::Min: return "min";
    case OpKind::All: return "all";
    case OpKind::Matmul: return "matmul";
    case OpKind::IndexSelect: return "index_select";
    case OpKind::Normal: return "normal_";
    case OpKind::Uniform: return "uniform_";
    case OpKind::Arange: return "arange";
    case OpKind::Where: return "where";
    case OpKind::Clamp: case OpKind::ClampScalar: return "clamp";
    case OpKind::Softmax: return "softmax";
    case OpKind::LogSoftmax: return "log_softmax";
    case OpKind::ArgMax: return "argmax";
    case OpKind::ArgMin: return "argmin";
    case OpKind::MaxPool2d: return "max_pool2d";
    case OpKind::AvgPool2d: return "avg_pool2d";
    case OpKind::MaxPool2dBackward: return "max_pool2d_backward";
    case OpKind::NllLoss: return "nll_loss";
    case OpKind::BatchNormStats: return "batch_norm";
    case OpKind::FFT: return "fft";
    case OpKind::Im2Col: return "im2col";
    case OpKind::Col2Im: return "col2im";
    case OpKind::OptimizerStep: return "optimizer_step";
    case OpKind::Cumsum: return "cumsum";
    case OpKind::Sort: return "sort";
    case OpKind::Gather: return "gather";
    case OpKind::ScatterAdd: return "scatter_add_";
    case OpKind::Multinomial: return "multinomial";
    case OpKind::IndexAdd: return "index_add_";
    case OpKind::LayerNorm: return "layer_norm";
    case OpKind::LayerNormBackward: return "layer_norm_backward";
    case OpKind::Gelu: return "gelu";
    case OpKind::GeluBackward: return "gelu_backward";
    case OpKind::ForeachMul: return "foreach_mul_";
    case OpKind::AmpNonFiniteCheckAndUnscale: return "_amp_foreach_non_finite_check_and_unscale_";
    case OpKind::AmpUpdateScale: return "_amp_update_scale_";
    case OpKind::LogSumExp: return "logsumexp";
    case OpKind::Triangle: return "triangle";
    case OpKind::LstmCell: return "_thnn_fused_lstm_cell";
    case OpKind::LstmCellBackward: return "_thnn_fused_lstm_cell_backward";
    case OpKind::GruCell: return "_thnn_fused_gru_cell";
    case OpKind::GruCellBackward: return "_thnn_fused_gru_cell_backward";
    case OpKind::GridSample: return "grid_sampler";
    case OpKind::GridSampleBackward: return "grid_sampler_backward";
  }
  return "op";
}

}  // namespace ember::detail
