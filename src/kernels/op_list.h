// The op list: every kernel op declared once, one row each.
//
// Note [The op list]
// EMBER_OP_LIST expands to one EMBER_OP_ROW(Kind, name, Family, cpu, cuda, Args) per op, with
// the EMBER_OP_ROW the including site defines (and undefines after):
//   Kind    its OpKind (kernel_call.h: the enum is this list, in this order)
//   name    the name errors, profiles and the stream sanitizer give it (op_name())
//   Family  what kind of op it is (OpFamily below: op_family())
//   cpu     the host executor's runner: cpu::run_<cpu> (backends/cpu/cpu_ops.h), which cpu::run
//           calls through a table made from this column (cpu_kernels.cpp)
//   cuda    the driver's launcher: driver::launch_<cuda> (backends/cuda/cuda_ops.h), in the
//           table kCudaLaunchers made from this column, which the driver and the host-run CUDA
//           tests (tests/cuda_host) both use
//   Args    the struct of its arguments (kernels/op_args.h, Note [Typed kernel arguments]):
//           detail::launch refuses a launch that carries another (check_args below)
// Families whose kernels share one body are lists of their own, each row also carrying the
// op's functor, so that the kernels' dispatch expands the list instead of naming each op: the
// tensor-scalar ops (EMBER_SCALAR_OPS), the comparisons (EMBER_COMPARE_OPS) and the reductions
// (EMBER_REDUCE_OPS) below; and,
// with the op's public function and derivative too, so that such an op is one row, one functor,
// one declaration and a test line, the floating unary ops (EMBER_FLOAT_UNARY_OPS, Note
// [Declaring an op] in unary_ops.h) and the floating binary ops (EMBER_FLOAT_BINARY_OPS below). Every table made
// from the list has a static check of its length against OpKind::kCount, so a row added here
// and forgotten there does not compile.
//
// The precision column of the public ops autocast knows is EMBER_AUTOCAST_OPS (Note [Autocast]
// in src/ops/autocast.cpp): X(Op, cuda policy, cpu policy), PyTorch 2.x's lists for the ops
// ember has. It is a list of public ops, not of kernels: linear, the convolutions and the
// losses are composites of several launches, and autocast decides at their entry.
//
// This header holds macros only: each layer expands the columns it may see (the kernel layer
// the enum and names, the backends their runners, src/ops the entry points and formulas,
// src/autograd the derivatives).
#pragma once

#include "kernels/unary_ops.h"

// clang-format off
#define EMBER_OP_LIST                                                                        \
  EMBER_OP_ROW(Copy,          "copy_",        Elementwise, copy,          copy,          None)          \
  EMBER_OP_ROW(Fill,          "fill_",        Elementwise, fill,          fill,          Value)         \
  EMBER_OP_ROW(Add,           "add",          Binary,      binary,        binary,        Alpha)         \
  EMBER_OP_ROW(Sub,           "sub",          Binary,      binary,        binary,        Alpha)         \
  EMBER_OP_ROW(Mul,           "mul",          Binary,      binary,        binary,        None)          \
  EMBER_OP_ROW(Div,           "div",          Binary,      binary,        binary,        None)          \
  EMBER_OP_ROW(Pow,           "pow",          Binary,      binary,        binary,        None)          \
  EMBER_FLOAT_BINARY_OPS(EMBER_OPS_FLOAT_BINARY_ROW_)                                        \
  EMBER_SCALAR_OPS(EMBER_OPS_SCALAR_ROW_)                                                    \
  EMBER_COMPARE_OPS(EMBER_OPS_COMPARE_ROW_)                                                  \
  EMBER_OP_ROW(Neg,           "neg",          Unary,       unary,         unary,         None)          \
  EMBER_OP_ROW(Abs,           "abs",          Unary,       unary,         unary,         None)          \
  EMBER_OP_ROW(Relu,          "relu",         Unary,       unary,         unary,         None)          \
  EMBER_FLOAT_UNARY_OPS(EMBER_OPS_FLOAT_UNARY_ROW_)                                          \
  EMBER_OP_ROW(IsClose,       "isclose",      Compare,     binary,        compare,       IsClose)       \
  EMBER_REDUCE_OPS(EMBER_OPS_REDUCE_ROW_)                                                     \
  EMBER_OP_ROW(Matmul,        "matmul",       Linalg,      matmul,        matmul,        Matmul)        \
  EMBER_OP_ROW(IndexSelect,   "index_select", Index,       index_select,  index_select,  Dim)           \
  EMBER_OP_ROW(Normal,        "normal_",      Random,      random,        generate,      Normal)        \
  EMBER_OP_ROW(Uniform,       "uniform_",     Random,      random,        generate,      Uniform)       \
  EMBER_OP_ROW(Arange,        "arange",       Random,      random,        generate,      Arange)        \
  EMBER_OP_ROW(Where,         "where",        Select,      select,        select,        None)          \
  EMBER_OP_ROW(Clamp,         "clamp",        Select,      select,        select,        Clamp)         \
  EMBER_OP_ROW(ClampScalar,   "clamp",        Select,      select,        select,        ClampScalar)   \
  EMBER_OP_ROW(Softmax,       "softmax",      Line,        softmax,       softmax,       Dim)           \
  EMBER_OP_ROW(LogSoftmax,    "log_softmax",  Line,        softmax,       softmax,       Dim)           \
  EMBER_OP_ROW(ArgMax,        "argmax",       Reduce,      arg_reduce,    arg_reduce,    Dim)           \
  EMBER_OP_ROW(ArgMin,        "argmin",       Reduce,      arg_reduce,    arg_reduce,    Dim)           \
  EMBER_OP_ROW(MaxPool2d,     "max_pool2d",   Pool,        pool,          pool,          None)          \
  EMBER_OP_ROW(AvgPool2d,     "avg_pool2d",   Pool,        pool,          pool,          None)          \
  EMBER_OP_ROW(MaxPool2dBackward, "max_pool2d_backward", Pool, max_pool_backward, max_pool_backward, None) \
  EMBER_OP_ROW(NllLoss,       "nll_loss",     Loss,        nll_loss,      nll_loss,      NllLoss)       \
  EMBER_OP_ROW(BatchNormStats, "batch_norm",  Norm,        batch_norm_stats, batch_norm_stats, None)    \
  EMBER_OP_ROW(FFT,           "fft",          Extension,   fft,           fft,           Fft)           \
  EMBER_OP_ROW(Im2Col,        "im2col",       Extension,   im2col,        im2col,        None)          \
  EMBER_OP_ROW(Col2Im,        "col2im",       Extension,   col2im,        col2im,        None)          \
  EMBER_OP_ROW(OptimizerStep, "optimizer_step", Foreach,   optimizer_step, optimizer_step, None)        \
  EMBER_OP_ROW(Cumsum,        "cumsum",       Line,        cumsum,        cumsum,        Dim)           \
  EMBER_OP_ROW(Sort,          "sort",         Line,        sort,          sort,          Sort)          \
  EMBER_OP_ROW(Gather,        "gather",       Index,       scatter,       scatter,       Dim)           \
  EMBER_OP_ROW(ScatterAdd,    "scatter_add_", Index,       scatter,       scatter,       Dim)           \
  EMBER_OP_ROW(Multinomial,   "multinomial",  Random,      multinomial,   multinomial,   Multinomial)   \
  EMBER_OP_ROW(IndexAdd,      "index_add_",   Index,       index_add,     index_add,     IndexAdd)      \
  EMBER_OP_ROW(LayerNorm,     "layer_norm",   Norm,        layer_norm,    layer_norm,    LayerNorm)     \
  EMBER_OP_ROW(LayerNormBackward, "layer_norm_backward", Norm, layer_norm_backward, layer_norm_backward, LayerNorm) \
  EMBER_OP_ROW(Gelu,          "gelu",         Elementwise, gelu,          gelu,          Gelu)          \
  EMBER_OP_ROW(GeluBackward,  "gelu_backward", Elementwise, gelu,         gelu,          Gelu)          \
  EMBER_OP_ROW(ForeachMul,    "foreach_mul_", Foreach,     foreach_mul,   foreach_mul,   None)          \
  EMBER_OP_ROW(AmpNonFiniteCheckAndUnscale, "_amp_foreach_non_finite_check_and_unscale_", Foreach,      \
    amp_check_and_unscale, amp_check_and_unscale, None)                                      \
  EMBER_OP_ROW(AmpUpdateScale, "_amp_update_scale_", Foreach, amp_update_scale, amp_update_scale, AmpUpdateScale) \
  EMBER_OP_ROW(LogSumExp,     "logsumexp",    Line,        logsumexp,     logsumexp,     Dim)           \
  EMBER_OP_ROW(Triangle,      "triangle",     Line,        triangle,      triangle,      Triangle)      \
  EMBER_OP_ROW(LstmCell,      "_thnn_fused_lstm_cell", Rnn, rnn_cell,     rnn_cell,      None)          \
  EMBER_OP_ROW(LstmCellBackward, "_thnn_fused_lstm_cell_backward", Rnn, rnn_cell, rnn_cell, None)       \
  EMBER_OP_ROW(GruCell,       "_thnn_fused_gru_cell", Rnn, rnn_cell,      rnn_cell,      None)          \
  EMBER_OP_ROW(GruCellBackward, "_thnn_fused_gru_cell_backward", Rnn, rnn_cell, rnn_cell, None)         \
  EMBER_OP_ROW(GridSample,    "grid_sampler", Sampling,    grid_sample,   grid_sample,   GridSample)    \
  EMBER_OP_ROW(GridSampleBackward, "grid_sampler_backward", Sampling, grid_sample, grid_sample, GridSample)

// Note [Declaring a binary op]
// The floating binary ops, one row each: X(Kind, name, Functor, saves_output, derivative of
// self, derivative of other), as EMBER_FLOAT_UNARY_OPS' rows (Note [Declaring an op]):
//   name     the public function ember::name(a, b) (declared in include/ember/ops.h, defined
//            from this list in src/ops/elementwise.cpp) and the name errors use
//   Functor  the body, a binary functor of functors.h (host and device): the cpu backend maps it
//            (cpu_binary.cpp), the driver launches it (cuda_binary.cu), the host-run CUDA test
//            compares the two for every row
//   saves_output, the derivatives: the node keeps both inputs, and the output where the row
//            says so; each derivative is an expression of g, self(), other() and result(), as a
//            line of PyTorch's derivatives.yaml, expanded in src/autograd/formulas.cpp
// The op layer promotes the two inputs to one dtype (integral ones to the default floating
// dtype, as PyTorch's binary_float_op) and broadcasts them; kernels accept real floating dtypes
// (float16 and bfloat16 computed in float32) and refuse complex ones.
#define EMBER_FLOAT_BINARY_OPS(X)                                                           \
  X(Atan2, atan2, Atan2Fn, false, g * other() / (self() * self() + other() * other()),                  \
    g * -self() / (self() * self() + other() * other()))

// The tensor-scalar ops: X(Kind, name, Functor, bool_ok): out = Functor(in0, value) of
// kargs::Value's value, the functor of functors.h; bool_ok: bool tensors are taken (add, mul,
// div), otherwise refused (pow, rsub: their own errors, in the kernels).
#define EMBER_SCALAR_OPS(X)                                                                 \
  X(AddScalar,  add,  AddScalarFn,  true)                                                    \
  X(MulScalar,  mul,  MulScalarFn,  true)                                                    \
  X(PowScalar,  pow,  PowScalarFn,  false)                                                   \
  X(RSubScalar, rsub, RSubScalarFn, false)                                                   \
  X(RDivScalar, div,  RDivScalarFn, true)

// The comparisons (bool out): X(Kind, name, Functor, complex_ok): Functor a predicate of
// functors.h; complex_ok: complex inputs are compared (eq, ne), otherwise refused.
#define EMBER_COMPARE_OPS(X)                                                                \
  X(Eq, eq, EqFn, true)                                                                      \
  X(Ne, ne, NeFn, true)                                                                      \
  X(Lt, lt, LtFn, false)                                                                     \
  X(Le, le, LeFn, false)                                                                     \
  X(Gt, gt, GtFn, false)                                                                     \
  X(Ge, ge, GeFn, false)

// The reductions over kargs::Dim's dim (-1: all elements): X(Kind, name, Reducer, Types): the
// reducer of reducers.h (cpu and CUDA at once), and the dtype class it takes (dtype_dispatch.h;
// the others refused with PyTorch's "not implemented" error).
#define EMBER_REDUCE_OPS(X)                                                                 \
  X(Sum,  sum,  SumReducer,  AnyType)                                                        \
  X(Mean, mean, MeanReducer, FloatComplexType)                                               \
  X(Max,  max,  MaxReducer,  RealType_)                                                      \
  X(Min,  min,  MinReducer,  RealType_)                                                      \
  X(All,  all,  AllReducer,  AnyType)

// The family lists' rows as rows of EMBER_OP_LIST.
#define EMBER_OPS_REDUCE_ROW_(Kind, name, ...) EMBER_OP_ROW(Kind, #name, Reduce, reduce, reduce, Dim)
#define EMBER_OPS_SCALAR_ROW_(Kind, name, ...) EMBER_OP_ROW(Kind, #name, Unary, unary, scalar_op, Value)
#define EMBER_OPS_COMPARE_ROW_(Kind, name, ...) EMBER_OP_ROW(Kind, #name, Compare, binary, compare, None)
#define EMBER_OPS_FLOAT_UNARY_ROW_(Kind, name, ...) EMBER_OP_ROW(Kind, #name, Unary, unary, unary, None)
#define EMBER_OPS_FLOAT_BINARY_ROW_(Kind, name, ...) EMBER_OP_ROW(Kind, #name, Binary, binary, binary, None)

/// Expands to `case OpKind::Kind:` for every row of a family list (for a switch over OpKind).
#define EMBER_FLOAT_BINARY_CASE(Kind, ...) case ::ember::detail::OpKind::Kind:

// The public ops of autocast's lists (Note [Autocast] in src/ops/autocast.cpp): X(Op, cuda's
// policy, the cpu's policy), one of None (in no list), Lower (to the autocast dtype), Float32,
// Promote (to the widest floating input), PyTorch 2.x's lists for the ops ember has. cuda's
// cross_entropy is not listed there: it runs as log_softmax and nll_loss, both float32. The
// recurrent modules follow the layers PyTorch runs them with (cuDNN's on cuda, oneDNN's on the
// cpu), whose autocast casts the whole layer. The cpu's cells are in no list: PyTorch's
// composite cell then runs its GEMMs in bfloat16 and its state update in float32, returning
// float32; ember's fused cell takes one dtype, so it runs in float32, returning the same dtype.
#define EMBER_AUTOCAST_OPS(X)                                                               \
  X(Matmul,       Lower,   Lower)                                                           \
  X(Bmm,          Lower,   Lower)                                                           \
  X(Addmm,        Lower,   Lower)                                                           \
  X(Baddbmm,      Lower,   Lower)                                                           \
  X(Linear,       Lower,   Lower)                                                           \
  X(Convolution,  Lower,   Lower)   /* conv1d/2d/3d */                                      \
  X(ConvTranspose, Lower,  Lower)                                                           \
  X(Attention,    Lower,   Lower)   /* scaled_dot_product_attention */                      \
  X(Rnn,          Lower,   Lower)   /* cuda: _cudnn_rnn; cpu: mkldnn_rnn_layer */           \
  X(RnnCell,      Lower,   Float32) /* cuda: lstm_cell, gru_cell, rnn_*_cell; cpu: above */ \
  X(Exp,          Float32, None)                                                            \
  X(Log,          Float32, None)                                                            \
  X(Rsqrt,        Float32, None)                                                            \
  X(Pow,          Float32, None)                                                            \
  X(Softmax,      Float32, None)    /* fp32_set_opt_dtype */                                \
  X(LogSoftmax,   Float32, None)    /* fp32_set_opt_dtype */                                \
  X(Sum,          Float32, None)    /* fp32_set_opt_dtype */                                \
  X(Cumsum,       Float32, None)    /* fp32_set_opt_dtype */                                \
  X(LogSumExp,    Float32, None)                                                            \
  X(LayerNorm,    Float32, None)                                                            \
  X(NllLoss,      Float32, Float32)                                                         \
  X(CrossEntropy, Float32, Float32) /* cpu: cross_entropy_loss */                           \
  X(MseLoss,      Float32, Float32)                                                         \
  X(Cdist,        Float32, Float32)                                                         \
  X(GridSample,   Promote, Float32) /* grid_sampler */                                      \
  X(Tensordot,    Promote, None)                                                            \
  X(ScatterAdd,   Promote, None)                                                            \
  X(Atan2,        Promote, None)                                                            \
  X(Cat,          None,    Promote)                                                         \
  X(Stack,        None,    Promote)
// clang-format on
