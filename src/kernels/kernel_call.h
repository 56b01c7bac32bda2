// KernelCall: a backend-neutral description of one op launch.
//
// Note [One launch choke point]
// Every op, on every backend, reaches the device through exactly one KernelCall:
// the op layer (src/ops) checks arguments, promotes dtypes, broadcasts shapes and
// allocates outputs, then hands a KernelCall to detail::launch() (src/ops/launch.h).
// cpu runs it inline (cpu::run), the emulated backend enqueues cpu::run on a stream
// worker, the driver backend launches CUDA kernels. Because outputs and inputs are
// listed here, this is also where the stream sanitizer (src/sanitizer) reads each
// launch's reads (inputs) and writes (outputs).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/small_vector.h"
#include "ember/dtype.h"
#include "ember/scalar.h"
#include "ember/tensor.h"
#include "kernels/kernel_payload.h"
#include "kernels/op_args.h"
#include "kernels/op_list.h"

namespace ember::detail {

/// Note [Allocation-free kernel arguments]
/// A KernelCall holds its operands and their shapes inline (up to kInlineOperands
/// operands a side, kInlineDims dims each), so building one, copying it onto an
/// emulated stream's queue and running it allocate nothing for common launches; a
/// fused optimizer step's long operand list, or a tensor of more dims, spills to the
/// heap. Shapes convert to and compare with IntList.
inline constexpr size_t kInlineDims = 6;
inline constexpr size_t kInlineOperands = 3;
using DimList = SmallVector<int64_t, kInlineDims>;

/// One operand: a strided view into device (or host) memory.
struct TensorArg {
  void* data = nullptr;  // address of element 0
  DType dtype = kFloat32;
  DimList sizes;    // element-wise ops: the broadcast output shape
  DimList strides;  // in elements; 0 along broadcast dims
  int64_t numel() const noexcept {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
};

// Note [Kernel operands]
// What each op's launch carries (the args named are the fields of its row's struct):
// Element-wise. Operands share sizes (broadcast already applied); inputs have the
// computation dtype (already promoted), outputs have it too, except comparisons
// (bool output) and Copy (any dtype to any dtype).
//   Copy,        // out = in0, converting dtype
//   Fill,        // out = value
//   Add,         // out = in0 + alpha * in1
//   Sub,         // out = in0 - alpha * in1
//   Mul, Div, Pow,
//   AddScalar,   // out = in0 + value
//   MulScalar,   // out = in0 * value
//   PowScalar,   // out = in0 ^ value
//   RSubScalar,  // out = value - in0
//   RDivScalar,  // out = value / in0
//   Eq, Ne, Lt, Le, Gt, Ge,              // bool out
//   Hypot, ...: the floating binary ops (Note [Declaring a binary op] in op_list.h)
//   Neg, Abs, Relu,
//   Exp, Log, ...: the floating unary ops (Note [Declaring an op] in unary_ops.h)
//   IsClose,     // bool out = |in0 - in1| <= atol + rtol * |in1|, equal_nan
// Reductions over `dim` (dim == -1: all elements). in0 is the input as is; out has
// in0's sizes with sizes[dim] = 1 (the keepdim form; the op layer squeezes it), or,
// for dim == -1, a single element (sizes {}).
//   Sum, Mean, Max, Min, All,
// Linear algebra: out[b] = in0[b] @ in1[b]; operands are 3-D (batch, rows, cols), any strides.
//   Matmul,
// out = in0.index_select(dim, in1); in1 is int64 or int32. Out-of-range indices are kernel errors.
//   IndexSelect,
// Random: Philox with (seed, offset); element i of out (row-major) uses counter offset + i.
//   Normal,      // mean, std
//   Uniform,     // [from, to)
//   Arange,      // out[i] = start + i * step
// Selection (element-wise; operands broadcast to out's sizes, values in out's dtype).
//   Where,        // out = in0 (bool) ? in1 : in2
//   Clamp,        // out = min(max(in0, in1), in2); has_min: in1 is a bound, has_max: in2 is
//   ClampScalar,  // out = min(max(in0, min), max), each where it is set
// Along `dim` of in0 (any strides); out has in0's sizes, or for ArgMax/ArgMin the
// keepdim shape (dim == -1: all elements, out a single element) and dtype int64.
//   Softmax, LogSoftmax,
//   ArgMax, ArgMin,  // the first index of the extreme value; NaN counts as the extreme
// Pooling over in0 {N, C, H, W}; payload a PoolGeometry (src/kernels/pool_geometry.h).
//   MaxPool2d,   // outputs: values, int64 indices (h * W + w); NaN wins
//   AvgPool2d,
//   MaxPool2dBackward,  // in0 grad of the output, in1 its int64 indices; out0 the input's grad
// Losses and normalisation (contracts in src/kernels/loss_kernels.h).
//   NllLoss,         // in0 {N, C, S} log-probabilities, in1 {N, S} int64 targets;
//                    out0 {N, S} losses (0 where ignored), out1 {N, S} 1 or 0 (counted or ignored).
//                    A target outside [0, C) other than ignore_index is a kernel error.
//   BatchNormStats,  // in0 {N, C, S}; out0 {C} mean, out1 {C} biased variance
// Extensions implemented beside their subsystem (src/fft, src/nn); `payload` carries
// their backend-specific state (an FFT plan, convolution geometry).
//   FFT,
//   Im2Col,
//   Col2Im,  // Im2Col's adjoint: sums columns back into the input's shape (src/kernels/conv_geometry.h)
// The fused update of a group of parameters (Note [Fused optimizer step] in
// kernels/optimizer_step.h); payload: a FusedStep.
//   OptimizerStep,
// Along `dim` of in0 (any strides), one line at a time (kernels/line_bodies.h).
//   Cumsum,       // out = running sum of in0; out int64 for integral in0, else in0's dtype
//   Sort,         // out0 values, out1 int64 indices: the first out0.sizes[dim] of in0's line in
//                 stable order (descending: largest first; NaN largest); sort and topk
//   Gather,       // out = in0.gather(dim, in1); in1 int64 of out's sizes. Out-of-range indices are kernel errors.
//   ScatterAdd,   // out0 (read and written) += in1 at in0 (int64) along dim, one line in order:
//                 deterministic. Out-of-range indices are kernel errors.
//   Multinomial,  // out0 {R, K} int64 samples of the rows of out1 {R, N} (float64 weights, contiguous,
//                 overwritten); with or without replacement; row r, draw s uses Philox index offset + r*K + s
// Transformer ops (contracts in src/kernels/transformer_kernels.h).
//   IndexAdd,
//   LayerNorm, LayerNormBackward,
//   Gelu, GeluBackward,
// Multi-tensor in-place scaling (torch._foreach_mul_ by a tensor): outputs[i] *= in0's
// single element, for every output; each output a dense, contiguous 1-D run of real
// elements of in0's dtype (float16, bfloat16, float32 or float64), as OptimizerStep's.
//   ForeachMul,
// Mixed precision's gradient check (torch._amp_foreach_non_finite_check_and_unscale_): out0 the
// float32 found-inf flag (read and written: set to 1 when any element is inf or NaN, never
// cleared); out1... the gradients, scaled in place by in0's single float32 element (the inverse
// scale; the multiplication in float32, or float64 for float64 gradients), each a dense,
// contiguous 1-D run of one floating dtype, as ForeachMul's.
//   AmpNonFiniteCheckAndUnscale,
// Mixed precision's scale update (torch._amp_update_scale_): out0 the float32 scale and out1
// the int32 growth tracker (one element each, read and written), in0 the float32 found-inf
// count; its args growth_factor, backoff_factor, growth_interval.
//   AmpUpdateScale,
// Fused reductions and masks of one launch each.
//   LogSumExp,  // out = log(sum(exp(in0))) along `dim`, the maximum subtracted first (an infinite
//               maximum counts as 0; an empty line gives -inf); out has in0's sizes with
//               sizes[dim] = 1; floating in0, out of its dtype
//   Triangle,   // out = in0 where column - row >= diagonal (upper: triu) or <= diagonal (tril) over in0's last
//               two dims (in0 at least 2-D, any batch dims and strides), else 0; out has in0's
//               sizes and dtype
// The fused recurrent cells (contracts in src/kernels/rnn_cell_kernels.h).
//   LstmCell, LstmCellBackward, GruCell, GruCellBackward,
// Grid sampling, 2-D and 3-D (contracts in src/kernels/grid_sample_kernels.h).
//   GridSample, GridSampleBackward,

/// The kernel ops, one per row of the op list (Note [The op list] in kernels/op_list.h), in its
/// order; Note [Kernel operands] above says what each launch carries.
enum class OpKind : uint8_t {
#define EMBER_OP_ROW(Kind, ...) Kind,
  EMBER_OP_LIST
#undef EMBER_OP_ROW
      kCount,
};
inline constexpr size_t kOpCount = static_cast<size_t>(OpKind::kCount);

/// What kind of op a row is (the op list's Family column).
enum class OpFamily : uint8_t {
  Elementwise,
  Unary,
  Binary,
  Compare,
  Reduce,
  Linalg,
  Index,
  Random,
  Select,
  Line,
  Pool,
  Loss,
  Norm,
  Extension,
  Foreach,
  Rnn,
  Sampling,
};
/// A row's family.
OpFamily op_family(OpKind op) noexcept;

using OperandList = SmallVector<TensorArg, kInlineOperands>;

struct KernelCall {
  OpKind op;
  OperandList outputs;
  OperandList inputs;
  OpArgs args;        // the struct of the op's row (Note [Typed kernel arguments] in kernels/op_args.h)
  uint64_t seed = 0;  // random ops: Philox's key and counter offset
  uint64_t offset = 0;
  int device = -1;  // the cuda device it runs on; -1 on cpu
  KernelPayload
      payload;  // op-specific state (FFT, Im2Col, Col2Im, pooling, OptimizerStep): Note [Typed kernel payload]
  // Random ops captured in a CUDA graph (Note [Graph-safe Philox] in ops/graph_rng.h): the
  // seed and a base offset read from device memory when the kernel runs; `offset` is then
  // relative to the base. Both nullptr otherwise.
  const int64_t* philox_seed_ptr = nullptr;
  const int64_t* philox_offset_ptr = nullptr;

  /// The op's arguments, which must be a T (Note [Typed kernel arguments]).
  template <typename T>
  const T& arg() const {
    return args.get<T>(op);
  }
};

}  // namespace ember::detail
