// The derivative formulas an op may record, declared once: each one's node name and save
// rule. src/autograd/formulas.cpp gives each its backward, in a table a static_assert ties
// to this list. The floating unary and binary ops' formulas come from their rows of the op
// list (Note [Declaring an op] in src/kernels/unary_ops.h, Note [Declaring a binary op] in
// src/kernels/op_list.h).
#pragma once

#include <array>
#include <cstdint>

#include "kernels/op_list.h"
#include "ops/formula_args.h"

namespace ember::detail {

/// What a formula's node keeps, and whether its op makes views (flags of a row below).
enum FormulaFlags : uint8_t {
  kSavesNothing = 0,
  kSavesInputs = 1,  // keeps every input for the backward
  kSavesOutput = 2,  // keeps the outputs (as aliases; see SavedVariable)
  kViewOp = 4,       // its outputs are views of its input (note_view made them so, in grad mode)
};

// X(Formula, PyTorch's node name, flags, the arguments its node keeps (formula_args.h)).
// The element-wise float ops' formulas follow, from their own lists (kernels/unary_ops.h,
// kernels/op_list.h): each keeps its inputs, and its output where its row says so; none has
// arguments.
// clang-format off
#define EMBER_FORMULAS(X)                                                      \
  /* element-wise */                                                           \
  X(Add, "AddBackward0", kSavesNothing, AlphaArgs)                             \
  X(Sub, "SubBackward0", kSavesNothing, AlphaArgs)                             \
  X(Mul, "MulBackward0", kSavesInputs, NoArgs)                                 \
  X(Div, "DivBackward0", kSavesInputs, NoArgs)                                 \
  X(Pow, "PowBackward1", kSavesInputs, NoArgs)                                 \
  X(AddScalar, "AddBackward1", kSavesNothing, ScalarArgs)                      \
  X(MulScalar, "MulBackward1", kSavesNothing, ScalarArgs)                      \
  X(PowScalar, "PowBackward0", kSavesInputs, ScalarArgs)                       \
  X(RSubScalar, "RsubBackward1", kSavesNothing, ScalarArgs)                    \
  X(RDivScalar, "DivBackward1", kSavesInputs, ScalarArgs)                      \
  X(Neg, "NegBackward0", kSavesNothing, NoArgs)                                \
  X(Abs, "AbsBackward0", kSavesInputs, NoArgs)                                 \
  X(Relu, "ReluBackward0", kSavesInputs, NoArgs)                               \
  /* reductions */                                                             \
  X(Sum, "SumBackward0", kSavesNothing, NoArgs)                                \
  X(SumDim, "SumBackward1", kSavesNothing, ReduceDimArgs)                      \
  X(Mean, "MeanBackward0", kSavesNothing, NoArgs)                              \
  X(MeanDim, "MeanBackward1", kSavesNothing, ReduceDimArgs)                    \
  X(MaxAll, "MaxBackward1", kSavesInputs | kSavesOutput, NoArgs)               \
  X(MaxDim, "MaxBackward0", kSavesInputs, ReduceDimArgs)                       \
  X(MinAll, "MinBackward1", kSavesInputs | kSavesOutput, NoArgs)               \
  X(MinDim, "MinBackward0", kSavesInputs, ReduceDimArgs)                       \
  /* linear algebra and indexing */                                            \
  X(Matmul, "MmBackward0", kSavesInputs, NoArgs)                               \
  X(Addmm, "AddmmBackward0", kSavesInputs, AddmmArgs)                          \
  X(IndexSelect, "IndexSelectBackward0", kSavesInputs, DimArgs)                \
  /* views */                                                                  \
  X(View, "ViewBackward0", kViewOp, NoArgs)                                    \
  X(T, "TBackward0", kViewOp, NoArgs)                                          \
  X(Transpose, "TransposeBackward0", kViewOp, TransposeArgs)                   \
  X(Permute, "PermuteBackward0", kViewOp, PermuteArgs)                         \
  X(Select, "SelectBackward0", kViewOp, SelectArgs)                            \
  X(Slice, "SliceBackward0", kViewOp, SliceArgs)                               \
  X(Unsqueeze, "UnsqueezeBackward0", kViewOp, DimArgs)                         \
  X(Squeeze, "SqueezeBackward1", kViewOp, DimArgs)                             \
  X(Expand, "ExpandBackward0", kViewOp, NoArgs)                                \
  X(AsStrided, "AsStridedBackward0", kViewOp, AsStridedArgs)                   \
  /* copies */                                                                 \
  X(ToCopy, "ToCopyBackward0", kSavesNothing, CopyArgs)                        \
  X(Clone, "CloneBackward0", kSavesNothing, CopyArgs)                          \
  X(CopyInPlace, "CopyBackwards", kSavesNothing, CopyArgs)                     \
  X(Fill, "FillBackward0", kSavesNothing, NoArgs)                              \
  /* training ops (src/autograd/formulas_nn.cpp) */                            \
  X(Cat, "CatBackward0", kSavesNothing, CatArgs)                               \
  X(Split, "SplitBackward0", kViewOp, DimArgs)                                 \
  X(Stack, "StackBackward0", kSavesNothing, DimArgs)                           \
  X(Where, "WhereBackward0", kSavesInputs, NoArgs)                             \
  X(ClampScalar, "ClampBackward1", kSavesInputs, ClampArgs)                    \
  X(Clamp, "ClampBackward0", kSavesInputs, NoArgs)                             \
  X(Softmax, "SoftmaxBackward0", kSavesInputs | kSavesOutput, DimArgs)         \
  X(LogSoftmax, "LogSoftmaxBackward0", kSavesInputs | kSavesOutput, DimArgs)   \
  X(VarMean, "NativeBatchNormBackward0", kSavesInputs | kSavesOutput, NoArgs)  \
  X(NllLoss, "NllLossBackward0", kSavesInputs, NllLossArgs)                    \
  X(MaxPool2d, "MaxPool2DWithIndicesBackward0", kSavesOutput, WindowArgs)      \
  X(AvgPool2d, "AvgPool2DBackward0", kSavesNothing, AvgPoolArgs)               \
  X(Conv2d, "ConvolutionBackward0", kSavesInputs, WindowArgs)                  \
  X(FFT, "FftC2CBackward0", kSavesNothing, FftArgs)                           \
  /* transformer ops (src/autograd/formulas_transformer.cpp) */                \
  X(Embedding, "EmbeddingBackward0", kSavesNothing, EmbeddingArgs)             \
  X(IndexAdd, "IndexAddBackward0", kSavesNothing, IndexAddArgs)                \
  X(LayerNorm, "NativeLayerNormBackward0", kSavesInputs | kSavesOutput, LayerNormArgs) \
  X(Gelu, "GeluBackward0", kSavesInputs, GeluArgs)                            \
  X(GeluBackward, "GeluBackwardBackward0", kSavesInputs, GeluArgs)             \
  /* scans, statistics, sorting, indexing (src/autograd/formulas_indexing.cpp) */ \
  X(Cumsum, "CumsumBackward0", kSavesNothing, DimArgs)                         \
  X(Logsumexp, "LogsumexpBackward0", kSavesInputs | kSavesOutput, ReduceDimsArgs) \
  X(SumDims, "SumBackward1", kSavesNothing, ReduceDimsArgs)                    \
  X(MeanDims, "MeanBackward1", kSavesNothing, ReduceDimsArgs)                  \
  X(Var, "VarBackward0", kSavesInputs, VarArgs)                                \
  X(Std, "StdBackward0", kSavesInputs | kSavesOutput, VarArgs)                 \
  X(Triu, "TriuBackward0", kSavesNothing, DiagonalArgs)                        \
  X(Tril, "TrilBackward0", kSavesNothing, DiagonalArgs)                        \
  X(Sort, "SortBackward0", kSavesOutput, DimArgs)                              \
  X(Gather, "GatherBackward0", kSavesInputs, DimArgs)                          \
  X(ScatterAdd, "ScatterAddBackward0", kSavesInputs, DimArgs)
// clang-format on

/// The derivative formulas (one per differentiable op signature).
enum class Formula : uint8_t {
#define EMBER_FORMULA_ID(F, ...) F,
  EMBER_FORMULAS(EMBER_FORMULA_ID) EMBER_FLOAT_UNARY_OPS(EMBER_FORMULA_ID) EMBER_FLOAT_BINARY_OPS(EMBER_FORMULA_ID)
#undef EMBER_FORMULA_ID
      kCount,
};

/// A formula's row of the list.
struct FormulaDecl {
  const char* name;    // PyTorch's node name
  uint8_t flags;       // FormulaFlags
  uint8_t args_index;  // the position of its argument type in FormulaArgs
};

inline constexpr std::array<FormulaDecl, static_cast<size_t>(Formula::kCount)> kFormulaDecls = {{
#define EMBER_FORMULA_DECL(F, name, flags, Args) \
  {name, static_cast<uint8_t>(flags), static_cast<uint8_t>(args_index<Args>())},
#define EMBER_UNARY_FORMULA_DECL(Kind, name, Functor, saves_output, ...)                        \
  {#Kind "Backward0", static_cast<uint8_t>(kSavesInputs | ((saves_output) ? kSavesOutput : 0)), \
   static_cast<uint8_t>(args_index<NoArgs>())},
    EMBER_FORMULAS(EMBER_FORMULA_DECL) EMBER_FLOAT_UNARY_OPS(EMBER_UNARY_FORMULA_DECL)
        EMBER_FLOAT_BINARY_OPS(EMBER_UNARY_FORMULA_DECL)  // both inputs kept, as a unary row keeps its one
#undef EMBER_UNARY_FORMULA_DECL
#undef EMBER_FORMULA_DECL
}};

constexpr const FormulaDecl& formula_decl(Formula f) { return kFormulaDecls[static_cast<size_t>(f)]; }
constexpr bool saves_inputs(Formula f) { return (formula_decl(f).flags & kSavesInputs) != 0; }
constexpr bool saves_output(Formula f) { return (formula_decl(f).flags & kSavesOutput) != 0; }
constexpr bool is_view_op(Formula f) { return (formula_decl(f).flags & kViewOp) != 0; }
/// Whether `attrs` carry the arguments `f`'s row names.
inline bool args_match(Formula f, const Attrs& attrs) { return attrs.args.index() == formula_decl(f).args_index; }

}  // namespace ember::detail
