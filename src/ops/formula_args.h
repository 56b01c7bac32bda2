// The non-tensor arguments a formula's node keeps, by name: one struct per kind of argument
// list, named by each formula's row in ops/formulas.h (Note [Declaring an op] in
// kernels/unary_ops.h). A node holds one of them (Attrs::args); the formula reads the one
// its row declares (FormulaNode::args<T>()), and recording checks that the op gave that one.
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>
#include <variant>

#include "ember/scalar.h"
#include "ember/stream.h"
#include "ember/tensor.h"

namespace ember::detail {

struct NoArgs {};
/// add, sub: a + alpha * b, a - alpha * b.
struct AlphaArgs {
  Scalar alpha;
};
/// The scalar operand: add and s - x (unused), mul (the factor), pow (the exponent), s / x (s).
struct ScalarArgs {
  Scalar value;
};
/// index_select, unsqueeze, squeeze, stack, split, softmax, log_softmax.
struct DimArgs {
  int64_t dim = 0;
};
/// sum, mean, max, min over one dim.
struct ReduceDimArgs {
  int64_t dim = 0;
  bool keepdim = false;
};
/// addmm: beta * bias + alpha * mat1 @ mat2.
struct AddmmArgs {
  Scalar beta;
  Scalar alpha;
};
struct TransposeArgs {
  int64_t dim0 = 0;
  int64_t dim1 = 0;
};
struct PermuteArgs {
  IntList dims;
};
struct SelectArgs {
  int64_t dim = 0;
  int64_t index = 0;
};
struct SliceArgs {
  int64_t dim = 0;
  int64_t start = 0;
  int64_t end = 0;
  int64_t step = 1;
};
struct AsStridedArgs {
  IntList sizes;
  IntList strides;
  int64_t offset = 0;
};
/// to, clone, copy_: the stream the backward's copy runs on across devices (the forward
/// copy's source side), if any.
struct CopyArgs {
  std::optional<cuda::Stream> source_stream;
};
/// cat: each input's size along dim (-1: a skipped legacy empty input).
struct CatArgs {
  int64_t dim = 0;
  IntList sizes;
};
/// clamp(min, max) with scalar bounds, either of which may be absent.
struct ClampArgs {
  Scalar min;
  Scalar max;
  bool has_min = false;
  bool has_max = false;
};
struct NllLossArgs {
  int64_t ignore_index = 0;
  int64_t reduction = 0;  // 0 none, 1 sum, 2 mean (the kernel contract's numbering)
};
/// max_pool2d: kh, kw, sh, sw, ph, pw, dh, dw; conv2d: the same and groups.
struct WindowArgs {
  IntList geometry;
};
/// avg_pool2d: kh, kw, sh, sw, ph, pw, 1, 1.
struct AvgPoolArgs {
  IntList geometry;
  bool count_include_pad = false;
  int64_t divisor_override = 0;  // 0: none
};
/// One transform over the last signal_sizes.size() dims.
struct FftArgs {
  enum Kind : uint8_t { C2C, R2C, C2R };
  IntList signal_sizes;
  Kind kind = C2C;
  bool forward = false;  // sign of the exponent: forward is -
  Scalar scale;          // the norm's scale
};

/// embedding: the indices (the node's only input is the weight) and the row that gets no
/// gradient (wrapped to [0, num_embeddings)), if any.
struct EmbeddingArgs {
  Tensor indices;
  std::optional<int64_t> padding_idx;
};
/// index_add: self.index_add(dim, index, source, alpha); the node's inputs are self and source.
struct IndexAddArgs {
  int64_t dim = 0;
  Tensor index;
  Scalar alpha;
};
/// layer_norm over the last `normalized_dims` dims.
struct LayerNormArgs {
  int64_t normalized_dims = 1;
  double eps = 1e-5;
};
/// gelu: approximate "tanh" (true) or "none".
struct GeluArgs {
  bool approximate_tanh = false;
};
/// logsumexp, sum and mean over several dims (wrapped, sorted; empty only for a 0-dim input).
struct ReduceDimsArgs {
  IntList dims;
  bool keepdim = false;
};
/// var and std over several dims (wrapped, sorted, never empty).
struct VarArgs {
  IntList dims;
  int64_t correction = 1;
  bool keepdim = false;
};
/// triu and tril.
struct DiagonalArgs {
  int64_t diagonal = 0;
};

using FormulaArgs = std::variant<NoArgs, AlphaArgs, ScalarArgs, DimArgs, ReduceDimArgs, AddmmArgs, TransposeArgs,
                                 PermuteArgs, SelectArgs, SliceArgs, AsStridedArgs, CopyArgs, CatArgs, ClampArgs,
                                 NllLossArgs, WindowArgs, AvgPoolArgs, FftArgs, EmbeddingArgs, IndexAddArgs,
                                 LayerNormArgs, GeluArgs, ReduceDimsArgs, VarArgs, DiagonalArgs>;

/// The position of `A` in FormulaArgs.
template <typename A, size_t I = 0>
constexpr size_t args_index() {
  static_assert(I < std::variant_size_v<FormulaArgs>, "not a formula argument type (FormulaArgs)");
  if constexpr (std::is_same_v<A, std::variant_alternative_t<I, FormulaArgs>>) {
    return I;
  } else {
    return args_index<A, I + 1>();
  }
}

/// What an op gives its node besides tensors: the arguments its formula's row names, and
/// optionally a node name other than the row's (one formula serving several PyTorch names).
struct Attrs {
  Attrs() = default;
  template <typename A>
  requires(!std::is_same_v<std::decay_t<A>, Attrs> && std::is_constructible_v<FormulaArgs, A>)
      Attrs(A args, const char* node_name = nullptr)  // NOLINT(google-explicit-constructor): an op passes its args
      : args(std::move(args)), name(node_name) {}

  FormulaArgs args;
  const char* name = nullptr;
};

}  // namespace ember::detail
