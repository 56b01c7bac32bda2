// Derivative formulas of the built-in ops, one line per input where possible (as PyTorch's
// derivatives.yaml). A formula may name: g (the output's gradient; grads[i] for op
// outputs i), n.input(i) and n.output() (saved tensors its spec declares), n.args<A>()
// (the op's non-tensor arguments), n.info(i) (each input's sizes, strides, dtype,
// device) and n.needs_grad(i). Gradients of complex inputs follow PyTorch's convention
// (the conjugate Wirtinger derivative: grad * conj(d out / d in)). Formulas call public
// ops, so they run on every backend and record themselves under create_graph.
// Names: a formula is `<op>_backward` (all of its inputs' gradients, e.g. mul_backward); a helper
// giving one input's is `<op>_backward_<input>`, the input named as in derivatives.yaml
// (mm_backward_mat1, index_select_backward_self).
#include <array>

#include "autograd/formula_node.h"
#include "autograd/formulas_impl.h"
#include "autograd/formulas_indexing.h"
#include "autograd/formulas_nn.h"
#include "autograd/formulas_transformer.h"
#include "ember/autograd.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"

namespace ember::autograd::detail {

namespace {

using Grads = std::vector<Tensor>;
using Node = FormulaNode;

Tensor mask_of(const Tensor& cond, DType dtype) { return cond.to(dtype); }

// ---- element-wise -----------------------------------------------------------------------
Grads add_backward(const Node& n, const Grads& g) {
  return {n.needs_grad(0) ? g[0] : Tensor(), n.needs_grad(1) ? scaled(g[0], n.args<AlphaArgs>().alpha) : Tensor()};
}
Grads sub_backward(const Node& n, const Grads& g) {
  const Scalar& alpha = n.args<AlphaArgs>().alpha;
  return {n.needs_grad(0) ? g[0] : Tensor(), n.needs_grad(1) ? scaled(g[0], negated(alpha)) : Tensor()};
}
Grads mul_backward(const Node& n, const Grads& g) {
  return {n.needs_grad(0) ? g[0] * conj(n.input(1)) : Tensor(), n.needs_grad(1) ? g[0] * conj(n.input(0)) : Tensor()};
}
Grads div_backward(const Node& n, const Grads& g) {
  Tensor b = conj(n.input(1));
  Tensor ga = n.needs_grad(0) ? g[0] / b : Tensor();
  Tensor gb = n.needs_grad(1) ? -g[0] * conj(n.input(0)) / (b * b) : Tensor();
  return {ga, gb};
}
Grads pow_backward(const Node& n, const Grads& g) {
  Tensor x = n.input(0), e = n.input(1);
  Tensor ga = n.needs_grad(0) ? g[0] * conj(e * ember::pow(x, e - 1)) : Tensor();
  Tensor gb = n.needs_grad(1) ? g[0] * conj(ember::pow(x, e) * ember::log(x)) : Tensor();
  return {ga, gb};
}
Grads add_scalar_backward(const Node&, const Grads& g) { return {g[0]}; }
Grads mul_scalar_backward(const Node& n, const Grads& g) { return {g[0] * conj_scalar(n.args<ScalarArgs>().value)}; }
Grads pow_scalar_backward(const Node& n, const Grads& g) {
  const Scalar& e = n.args<ScalarArgs>().value;
  if (e.is_complex() ? e.to_complex() == std::complex<double>(0) : e.to_double() == 0.0) return {zeros_like(g[0])};
  Tensor x = n.input(0);
  return {g[0] * conj(ember::pow(x, minus_one(e)) * e)};
}
Grads rsub_scalar_backward(const Node&, const Grads& g) { return {-g[0]}; }
Grads rdiv_scalar_backward(const Node& n, const Grads& g) {  // s / x
  Tensor x = n.input(0);
  return {-g[0] * conj(n.args<ScalarArgs>().value / (x * x))};
}
Grads neg_backward(const Node&, const Grads& g) { return {-g[0]}; }
Grads abs_backward(const Node& n, const Grads& g) {
  Tensor x = n.input(0);
  if (is_complex(x.dtype())) return {g[0] * (x / ember::abs(x))};  // grad * sgn(x); real grad
  return {g[0] * (mask_of(x.gt(0), x.dtype()) - mask_of(x.lt(0), x.dtype()))};
}
// A mask multiplied in: on the cpu, cheaper than one where (the select kernel's loop is slow).
// PyTorch's threshold_backward: zero where the input is <= 0, the gradient elsewhere (a
// NaN input passes its gradient; an infinite gradient on a negative input gives 0).
Grads relu_backward(const Node& n, const Grads& g) { return {g[0].masked_fill(n.input(0).le(0), 0)}; }

// Note [Formulas as data]
// The element-wise float ops' backwards, from the derivative column of their declaration
// (kernels/unary_ops.h): g is the output's gradient, x() the saved input and y() the
// output, the saved one unless a recorded backward (create_graph) needs one with history,
// then recomputed from x(). Each is unpacked only if the expression names it, so an in-place
// change of what the formula does not read is no error, as in PyTorch.
#define EMBER_UNARY_BACKWARD(Kind, name, Functor, saves_output, derivative)                                         \
  Grads name##_backward(const Node& n, const Grads& grads) {                                                        \
    const Tensor& g = grads[0];                                                                                     \
    [[maybe_unused]] auto x = [&] { return n.input(0); };                                                           \
    [[maybe_unused]] auto y = [&] { return (saves_output) && !is_grad_enabled() ? n.output() : ember::name(x()); }; \
    return {derivative};                                                                                            \
  }
EMBER_FLOAT_UNARY_OPS(EMBER_UNARY_BACKWARD)
#undef EMBER_UNARY_BACKWARD

// The floating binary ops' backwards, from the derivative columns of their rows (Note
// [Declaring a binary op] in kernels/op_list.h): self() and other() the saved inputs, result()
// the output (saved, or recomputed under create_graph, as y() above). A gradient is computed
// only for an input that needs one; the engine sums a broadcast one down to its input's shape.
#define EMBER_BINARY_BACKWARD(Kind, name, Functor, saves_output, derivative_self, derivative_other) \
  Grads name##_backward(const Node& n, const Grads& grads) {                                        \
    const Tensor& g = grads[0];                                                                     \
    [[maybe_unused]] auto self = [&] { return n.input(0); };                                        \
    [[maybe_unused]] auto other = [&] { return n.input(1); };                                       \
    [[maybe_unused]] auto result = [&] {                                                            \
      return (saves_output) && !is_grad_enabled() ? n.output() : ember::name(self(), other());      \
    };                                                                                              \
    return {n.needs_grad(0) ? Tensor(derivative_self) : Tensor(),                                   \
            n.needs_grad(1) ? Tensor(derivative_other) : Tensor()};                                 \
  }
EMBER_FLOAT_BINARY_OPS(EMBER_BINARY_BACKWARD)
#undef EMBER_BINARY_BACKWARD

// ---- reductions ---------------------------------------------------------------------------
// The output's gradient with the reduced dim put back (size 1) when keepdim was false.
Tensor unsqueeze_reduced(const Node& n, const Tensor& g) {
  const auto& a = n.args<ReduceDimArgs>();
  return a.keepdim || n.info(0).sizes.empty() ? g : g.unsqueeze(a.dim);
}
Grads sum_backward(const Node& n, const Grads& g) { return {g[0].expand(n.info(0).sizes)}; }
Grads sum_dim_backward(const Node& n, const Grads& g) { return {unsqueeze_reduced(n, g[0]).expand(n.info(0).sizes)}; }
Grads mean_backward(const Node& n, const Grads& g) {
  int64_t count = 1;
  for (int64_t s : n.info(0).sizes) count *= s;
  return {g[0].expand(n.info(0).sizes) / Scalar(static_cast<double>(count))};
}
Grads mean_dim_backward(const Node& n, const Grads& g) {
  const IntList& sizes = n.info(0).sizes;
  double count = sizes.empty() ? 1.0 : static_cast<double>(sizes[n.args<ReduceDimArgs>().dim]);
  return {unsqueeze_reduced(n, g[0]).expand(sizes) / Scalar(count)};
}
// max()/min() over all elements: the gradient is shared evenly between tied elements.
Grads extremum_all_backward(const Node& n, const Grads& g) {
  Tensor x = n.input(0);
  Tensor mask = mask_of(x.eq(n.output()), g[0].dtype());
  return {mask * (g[0] / mask.sum())};
}
// max(dim)/min(dim): the gradient goes to the element whose index the op returns (the
// first of tied elements, as argmax/argmin), as PyTorch's value_selecting_reduction_backward.
Grads extremum_dim_backward(const Node& n, const Grads& g, bool is_max) {
  const IntList& sizes = n.info(0).sizes;
  if (sizes.empty()) return {g[0]};
  Tensor x = n.input(0);
  int64_t d = n.args<ReduceDimArgs>().dim;
  Tensor index = is_max ? ember::argmax(x, d, true) : ember::argmin(x, d, true);
  IntList shape(sizes.size(), 1);
  shape[d] = sizes[d];
  Tensor positions = arange(sizes[d], TensorOptions(kInt64).device(x.device())).reshape(shape);
  return {ember::where(positions.eq(index), unsqueeze_reduced(n, g[0]), 0)};
}
Grads max_dim_backward(const Node& n, const Grads& g) { return extremum_dim_backward(n, g, true); }
Grads min_dim_backward(const Node& n, const Grads& g) { return extremum_dim_backward(n, g, false); }

// ---- linear algebra and indexing ------------------------------------------------------------
Grads matmul_backward(const Node& n, const Grads& g) {
  Tensor a = n.input(0), b = n.input(1);
  bool a_vector = a.dim() == 1, b_vector = b.dim() == 1;
  Tensor A = a_vector ? a.unsqueeze(0) : a, B = b_vector ? b.unsqueeze(1) : b;
  Tensor G = a_vector && b_vector ? g[0].reshape({1, 1})
             : a_vector           ? g[0].unsqueeze(-2)
             : b_vector           ? g[0].unsqueeze(-1)
                                  : g[0];
  Tensor ga, gb;
  if (n.needs_grad(0)) {
    ga = mm_backward_mat1(G, B, a_vector ? InputInfo{} : n.info(0));
    if (a_vector) ga = ga.squeeze(-2);
  }
  if (n.needs_grad(1) && a.dim() >= 3 && b.dim() == 2) {
    // The forward folded a's batch dims into its rows: so does the gradient, one product.
    int64_t rows = 1;
    for (int64_t d = 0; d + 1 < a.dim(); ++d) rows *= a.size(d);
    gb = conj(a.reshape({rows, a.size(-1)})).transpose(0, 1).matmul(G.reshape({rows, G.size(-1)}));
  } else if (n.needs_grad(1)) {
    gb = mm_backward_mat2(G, A, b_vector ? InputInfo{} : n.info(1));
    if (b_vector) gb = gb.squeeze(-1);
  }
  return {ga, gb};
}
// addmm(bias, mat1, mat2, beta = scalar, alpha = scalar2): beta * bias + alpha * mat1 @ mat2.
Grads addmm_backward(const Node& n, const Grads& g) {
  const auto& a = n.args<AddmmArgs>();
  Scalar alpha = conj_scalar(a.alpha);
  Tensor gbias = n.needs_grad(0) ? scaled(g[0], conj_scalar(a.beta)) : Tensor();
  Tensor ga = n.needs_grad(1) ? scaled(mm_backward_mat1(g[0], n.input(2), n.info(1)), alpha) : Tensor();
  Tensor gb = n.needs_grad(2) ? scaled(mm_backward_mat2(g[0], n.input(1), n.info(2)), alpha) : Tensor();
  return {gbias, ga, gb};
}
Grads index_select_backward(const Node& n, const Grads& g) {
  return {index_select_backward_self(g[0], n.info(0).sizes, n.args<DimArgs>().dim, n.input(1)), Tensor()};
}

// ---- views ----------------------------------------------------------------------------------
Grads view_backward(const Node& n, const Grads& g) { return {g[0].reshape(n.info(0).sizes)}; }
Grads transpose_backward(const Node& n, const Grads& g) {
  const auto& a = n.args<TransposeArgs>();
  return {g[0].transpose(a.dim0, a.dim1)};
}
Grads t_backward(const Node& n, const Grads& g) { return {n.info(0).sizes.size() < 2 ? g[0] : g[0].transpose(0, 1)}; }
Grads permute_backward(const Node& n, const Grads& g) {
  const IntList& dims = n.args<PermuteArgs>().dims;
  IntList inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[dims[i]] = static_cast<int64_t>(i);
  return {g[0].permute(inverse)};
}
Grads select_backward(const Node& n, const Grads& g) {
  const InputInfo& in = n.info(0);
  Tensor out = zeros(in.sizes, TensorOptions(g[0].dtype()).device(g[0].device()));
  out.select(n.args<SelectArgs>().dim, n.args<SelectArgs>().index).copy_(g[0]);
  return {out};
}
Grads slice_backward(const Node& n, const Grads& g) {
  const InputInfo& in = n.info(0);
  const auto& a = n.args<SliceArgs>();
  Tensor out = zeros(in.sizes, TensorOptions(g[0].dtype()).device(g[0].device()));
  out.slice(a.dim, a.start, a.end, a.step).copy_(g[0]);
  return {out};
}
Grads unsqueeze_backward(const Node& n, const Grads& g) { return {g[0].squeeze(n.args<DimArgs>().dim)}; }
Grads squeeze_backward(const Node& n, const Grads& g) {
  return {static_cast<int64_t>(n.info(0).sizes.size()) == g[0].dim() ? g[0] : g[0].unsqueeze(n.args<DimArgs>().dim)};
}
Grads expand_backward(const Node& n, const Grads& g) { return {sum_to(g[0], n.info(0).sizes)}; }
Grads as_strided_backward(const Node& n, const Grads& g) {
  return {as_strided_backward_self(g[0], n.info(0), n.args<AsStridedArgs>())};
}

// ---- copies ---------------------------------------------------------------------------------
Grads to_copy_backward(const Node& n, const Grads& g) {
  return {to_copy_backward_self(g[0], n.info(0), n.args<CopyArgs>())};
}
Grads clone_backward(const Node&, const Grads& g) { return {g[0]}; }
Grads copy_inplace_backward(const Node& n, const Grads& g) {  // inputs: self (overwritten), src
  return {Tensor(), to_copy_backward_self(sum_to(g[0], n.info(1).sizes), n.info(1), n.args<CopyArgs>())};
}

Grads fill_backward(const Node& n, const Grads&) { return Grads(n.next_edges().size()); }

constexpr size_t kFormulas = static_cast<size_t>(Formula::kCount);

// One row per formula, in the order of its declaration (src/ops/formulas.h): checked below.
constexpr std::array<FormulaSpec, kFormulas> kTable = {
    {{Formula::Add, add_backward},
     {Formula::Sub, sub_backward},
     {Formula::Mul, mul_backward},
     {Formula::Div, div_backward},
     {Formula::Pow, pow_backward},
     {Formula::AddScalar, add_scalar_backward},
     {Formula::MulScalar, mul_scalar_backward},
     {Formula::PowScalar, pow_scalar_backward},
     {Formula::RSubScalar, rsub_scalar_backward},
     {Formula::RDivScalar, rdiv_scalar_backward},
     {Formula::Neg, neg_backward},
     {Formula::Abs, abs_backward},
     {Formula::Relu, relu_backward},
     {Formula::Sum, sum_backward},
     {Formula::SumDim, sum_dim_backward},
     {Formula::Mean, mean_backward},
     {Formula::MeanDim, mean_dim_backward},
     {Formula::MaxAll, extremum_all_backward},
     {Formula::MaxDim, max_dim_backward},
     {Formula::MinAll, extremum_all_backward},
     {Formula::MinDim, min_dim_backward},
     {Formula::Matmul, matmul_backward},
     {Formula::Addmm, addmm_backward},
     {Formula::IndexSelect, index_select_backward},
     {Formula::View, view_backward},
     {Formula::T, t_backward},
     {Formula::Transpose, transpose_backward},
     {Formula::Permute, permute_backward},
     {Formula::Select, select_backward},
     {Formula::Slice, slice_backward},
     {Formula::Unsqueeze, unsqueeze_backward},
     {Formula::Squeeze, squeeze_backward},
     {Formula::Expand, expand_backward},
     {Formula::AsStrided, as_strided_backward},
     {Formula::ToCopy, to_copy_backward},
     {Formula::Clone, clone_backward},
     {Formula::CopyInPlace, copy_inplace_backward},
     {Formula::Fill, fill_backward},
     {Formula::Cat, nn_formulas::cat_backward},
     {Formula::Split, nn_formulas::split_backward},
     {Formula::Stack, nn_formulas::stack_backward},
     {Formula::Where, nn_formulas::where_backward},
     {Formula::ClampScalar, nn_formulas::clamp_scalar_backward},
     {Formula::Clamp, nn_formulas::clamp_backward},
     {Formula::Softmax, nn_formulas::softmax_backward},
     {Formula::LogSoftmax, nn_formulas::log_softmax_backward},
     {Formula::VarMean, nn_formulas::var_mean_backward},
     {Formula::NllLoss, nn_formulas::nll_loss_backward},
     {Formula::MaxPool2d, nn_formulas::max_pool2d_backward},
     {Formula::AvgPool2d, nn_formulas::avg_pool2d_backward},
     {Formula::Conv2d, nn_formulas::conv2d_backward},
     {Formula::FFT, nn_formulas::fft_backward},
     {Formula::Embedding, transformer_formulas::embedding_backward},
     {Formula::IndexAdd, transformer_formulas::index_add_backward},
     {Formula::LayerNorm, transformer_formulas::layer_norm_backward},
     {Formula::Gelu, transformer_formulas::gelu_backward},
     {Formula::GeluBackward, transformer_formulas::gelu_backward_backward},
     {Formula::Cumsum, indexing_formulas::cumsum_backward},
     {Formula::Logsumexp, indexing_formulas::logsumexp_backward},
     {Formula::SumDims, indexing_formulas::sum_dims_backward},
     {Formula::MeanDims, indexing_formulas::mean_dims_backward},
     {Formula::Var, indexing_formulas::var_backward},
     {Formula::Std, indexing_formulas::std_backward},
     {Formula::Triu, indexing_formulas::triu_backward},
     {Formula::Tril, indexing_formulas::tril_backward},
     {Formula::Sort, indexing_formulas::sort_backward},
     {Formula::Gather, indexing_formulas::gather_backward},
     {Formula::ScatterAdd, indexing_formulas::scatter_add_backward},
#define EMBER_UNARY_ROW(Kind, name, ...) {Formula::Kind, name##_backward},
     EMBER_FLOAT_UNARY_OPS(EMBER_UNARY_ROW) EMBER_FLOAT_BINARY_OPS(EMBER_UNARY_ROW)
#undef EMBER_UNARY_ROW
    }};

// A row out of place, or one missing (std::array fills the tail with empty rows, whose
// formula is the first one), fails here. (The backward pointers are not compared with null:
// under UBSan GCC does not fold that comparison for functions of other files.)
constexpr bool in_declaration_order() {
  for (size_t i = 0; i < kFormulas; ++i) {
    if (static_cast<size_t>(kTable[i].formula) != i) return false;
  }
  return true;
}
static_assert(in_declaration_order(), "kTable must list every Formula once, in the order of src/ops/formulas.h");

}  // namespace

BackwardFormula backward_of(Formula formula) { return kTable.at(static_cast<size_t>(formula)).backward; }

}  // namespace ember::autograd::detail
