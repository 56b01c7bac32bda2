// The derivative formulas an op may record, declared once: each one's node name and save
// rule. src/autograd/formulas.cpp gives each its backward, in a table a static_assert ties
// to this list (Note [Declaring an op] in src/kernels/unary_ops.h).
#pragma once

#include <array>
#include <cstdint>

#include "kernels/unary_ops.h"

namespace ember::detail {

/// What a formula's node keeps, and whether its op makes views (flags of a row below).
enum FormulaFlags : uint8_t {
  kSavesNothing = 0,
  kSavesInputs = 1,  // keeps every input for the backward
  kSavesOutput = 2,  // keeps the outputs (as aliases; see SavedVariable)
  kViewOp = 4,       // its outputs are views of its input (note_view made them so, in grad mode)
};

// X(Formula, PyTorch's node name, flags). The element-wise float ops' formulas follow, from
// their own list (kernels/unary_ops.h): each keeps its input, and its output where its row
// says so.
// clang-format off
#define EMBER_FORMULAS(X)                                                      \
  /* element-wise */                                                           \
  X(Add, "AddBackward0", kSavesNothing)                                        \
  X(Sub, "SubBackward0", kSavesNothing)                                        \
  X(Mul, "MulBackward0", kSavesInputs)                                         \
  X(Div, "DivBackward0", kSavesInputs)                                         \
  X(Pow, "PowBackward1", kSavesInputs)                                         \
  X(AddScalar, "AddBackward1", kSavesNothing)                                  \
  X(MulScalar, "MulBackward1", kSavesNothing)                                  \
  X(PowScalar, "PowBackward0", kSavesInputs)                                   \
  X(RSubScalar, "RsubBackward1", kSavesNothing)                                \
  X(RDivScalar, "DivBackward1", kSavesInputs)                                  \
  X(Neg, "NegBackward0", kSavesNothing)                                        \
  X(Abs, "AbsBackward0", kSavesInputs)                                         \
  X(Relu, "ReluBackward0", kSavesInputs)                                       \
  /* reductions */                                                             \
  X(Sum, "SumBackward0", kSavesNothing)                                        \
  X(SumDim, "SumBackward1", kSavesNothing)                                     \
  X(Mean, "MeanBackward0", kSavesNothing)                                      \
  X(MeanDim, "MeanBackward1", kSavesNothing)                                   \
  X(MaxAll, "MaxBackward1", kSavesInputs | kSavesOutput)                       \
  X(MaxDim, "MaxBackward0", kSavesInputs)                                      \
  X(MinAll, "MinBackward1", kSavesInputs | kSavesOutput)                       \
  X(MinDim, "MinBackward0", kSavesInputs)                                      \
  /* linear algebra and indexing */                                            \
  X(Matmul, "MmBackward0", kSavesInputs)                                       \
  X(Addmm, "AddmmBackward0", kSavesInputs)                                     \
  X(IndexSelect, "IndexSelectBackward0", kSavesInputs)                         \
  /* views */                                                                  \
  X(View, "ViewBackward0", kViewOp)                                            \
  X(T, "TBackward0", kViewOp)                                                  \
  X(Transpose, "TransposeBackward0", kViewOp)                                  \
  X(Permute, "PermuteBackward0", kViewOp)                                      \
  X(Select, "SelectBackward0", kViewOp)                                        \
  X(Slice, "SliceBackward0", kViewOp)                                          \
  X(Unsqueeze, "UnsqueezeBackward0", kViewOp)                                  \
  X(Squeeze, "SqueezeBackward1", kViewOp)                                      \
  X(Expand, "ExpandBackward0", kViewOp)                                        \
  X(AsStrided, "AsStridedBackward0", kViewOp)                                  \
  /* copies */                                                                 \
  X(ToCopy, "ToCopyBackward0", kSavesNothing)                                  \
  X(Clone, "CloneBackward0", kSavesNothing)                                    \
  X(CopyInPlace, "CopyBackwards", kSavesNothing)                               \
  X(Fill, "FillBackward0", kSavesNothing)                                      \
  /* training ops (src/autograd/formulas_nn.cpp) */                            \
  X(Cat, "CatBackward0", kSavesNothing)                                        \
  X(Split, "SplitBackward0", kViewOp)                                          \
  X(Stack, "StackBackward0", kSavesNothing)                                    \
  X(Where, "WhereBackward0", kSavesInputs)                                     \
  X(ClampScalar, "ClampBackward1", kSavesInputs)                               \
  X(Clamp, "ClampBackward0", kSavesInputs)                                     \
  X(Softmax, "SoftmaxBackward0", kSavesInputs | kSavesOutput)                  \
  X(LogSoftmax, "LogSoftmaxBackward0", kSavesInputs | kSavesOutput)            \
  X(VarMean, "NativeBatchNormBackward0", kSavesInputs | kSavesOutput)          \
  X(NllLoss, "NllLossBackward0", kSavesInputs)                                 \
  X(MaxPool2d, "MaxPool2DWithIndicesBackward0", kSavesOutput)                  \
  X(AvgPool2d, "AvgPool2DBackward0", kSavesNothing)                            \
  X(Conv2d, "ConvolutionBackward0", kSavesInputs)                              \
  X(FFT, "FftC2CBackward0", kSavesNothing)
// clang-format on

/// The derivative formulas (one per differentiable op signature).
enum class Formula : uint8_t {
#define EMBER_FORMULA_ID(F, ...) F,
  EMBER_FORMULAS(EMBER_FORMULA_ID)
  EMBER_FLOAT_UNARY_OPS(EMBER_FORMULA_ID)
#undef EMBER_FORMULA_ID
  kCount,
};

/// A formula's row of the list.
struct FormulaDecl {
  const char* name;  // PyTorch's node name
  uint8_t flags;     // FormulaFlags
};

inline constexpr std::array<FormulaDecl, static_cast<size_t>(Formula::kCount)> kFormulaDecls = {{
#define EMBER_FORMULA_DECL(F, name, flags) {name, static_cast<uint8_t>(flags)},
#define EMBER_UNARY_FORMULA_DECL(Kind, name, Functor, saves_output, ...) \
  {#Kind "Backward0", static_cast<uint8_t>(kSavesInputs | ((saves_output) ? kSavesOutput : 0))},
    EMBER_FORMULAS(EMBER_FORMULA_DECL)
    EMBER_FLOAT_UNARY_OPS(EMBER_UNARY_FORMULA_DECL)
#undef EMBER_UNARY_FORMULA_DECL
#undef EMBER_FORMULA_DECL
}};

constexpr const FormulaDecl& formula_decl(Formula f) { return kFormulaDecls[static_cast<size_t>(f)]; }
constexpr bool saves_inputs(Formula f) { return (formula_decl(f).flags & kSavesInputs) != 0; }
constexpr bool saves_output(Formula f) { return (formula_decl(f).flags & kSavesOutput) != 0; }
constexpr bool is_view_op(Formula f) { return (formula_decl(f).flags & kViewOp) != 0; }

}  // namespace ember::detail
