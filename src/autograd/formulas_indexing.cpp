// Derivative formulas of cumsum, logsumexp, sum and mean over dims, var, std, triu, tril, sort, topk, gather and
// scatter_add, as PyTorch's derivatives.yaml gives them. They call public ops, so they
// run on every backend and record themselves under create_graph.
#include "autograd/formulas_indexing.h"

#include <algorithm>

#include "ember/factories.h"
#include "ember/ops.h"

namespace ember::autograd::detail::indexing_formulas {

using ember::detail::DiagonalArgs;
using ember::detail::ReduceDimsArgs;
using ember::detail::VarArgs;

namespace {

// A reduction's gradient (or saved output) with the reduced dims put back (size 1).
Tensor unsqueeze_dims(Tensor t, const IntList& dims, bool keepdim) {
  if (keepdim) return t;
  for (int64_t d : dims) t = t.unsqueeze(d);
  return t;
}

// var's input gradient for the gradient `grad` of var (kept dims): 2 (x - mean) / (N - c).
Tensor var_backward_self(const Tensor& x, const Tensor& grad, const VarArgs& a) {
  int64_t count = 1;
  for (int64_t d : a.dims) count *= x.size(d);
  Tensor mean = x;
  for (int64_t d : a.dims) mean = mean.sum(d, /*keepdim=*/true);
  mean = mean / static_cast<double>(count);
  const double divisor = std::max(static_cast<double>(count - a.correction), 0.0);
  return grad * (x - mean) * (2.0 / divisor);
}

}  // namespace

// The reversed cumulative sum: flip, cumsum, flip (flips as index_select of a reversed arange).
Grads cumsum_backward(const FormulaNode& n, const Grads& g) {
  const int64_t dim = n.args<DimArgs>().dim;
  if (g[0].dim() == 0) return {g[0]};
  const int64_t size = g[0].size(dim);
  Tensor reversed = arange(size - 1, -1, -1, TensorOptions(kInt64).device(g[0].device()));
  return {g[0].index_select(dim, reversed).cumsum(dim).index_select(dim, reversed)};
}

Grads logsumexp_backward(const FormulaNode& n, const Grads& g) {
  const auto& a = n.args<ReduceDimsArgs>();
  Tensor x = n.input(0);
  return {unsqueeze_dims(g[0], a.dims, a.keepdim) * (x - unsqueeze_dims(n.output(), a.dims, a.keepdim)).exp()};
}

// sum and mean over a list of dims: the gradient spread back over the reduced positions (the
// engine casts it to the input's dtype when the result had another, Note [Gradient validation]).
Grads sum_dims_backward(const FormulaNode& n, const Grads& g) {
  const auto& a = n.args<ReduceDimsArgs>();
  return {unsqueeze_dims(g[0], a.dims, a.keepdim).expand(n.info(0).sizes)};
}

Grads mean_dims_backward(const FormulaNode& n, const Grads& g) {
  const auto& a = n.args<ReduceDimsArgs>();
  int64_t count = 1;
  for (int64_t d : a.dims) count *= n.info(0).sizes[static_cast<size_t>(d)];
  return {unsqueeze_dims(g[0], a.dims, a.keepdim).expand(n.info(0).sizes) / Scalar(static_cast<double>(count))};
}

Grads var_backward(const FormulaNode& n, const Grads& g) {
  const auto& a = n.args<VarArgs>();
  return {var_backward_self(n.input(0), unsqueeze_dims(g[0], a.dims, a.keepdim), a)};
}

// PyTorch's std_backward: var's gradient of grad / (2 std), 0 where std is 0.
Grads std_backward(const FormulaNode& n, const Grads& g) {
  const auto& a = n.args<VarArgs>();
  Tensor result = unsqueeze_dims(n.output(), a.dims, a.keepdim);
  Tensor grad_var = (unsqueeze_dims(g[0], a.dims, a.keepdim) / (result * 2)).masked_fill(result.eq(0), 0);
  return {var_backward_self(n.input(0), grad_var, a)};
}

Grads triu_backward(const FormulaNode& n, const Grads& g) { return {g[0].triu(n.args<DiagonalArgs>().diagonal)}; }
Grads tril_backward(const FormulaNode& n, const Grads& g) { return {g[0].tril(n.args<DiagonalArgs>().diagonal)}; }

// sort and topk: the values' gradient put back at the positions they came from.
Grads sort_backward(const FormulaNode& n, const Grads& g) {
  const IntList& sizes = n.info(0).sizes;
  if (sizes.empty()) return {g[0].reshape({})};
  Tensor zero = zeros(sizes, TensorOptions(g[0].dtype()).device(g[0].device()));
  return {zero.scatter_add(n.args<DimArgs>().dim, n.output(1), g[0])};
}

Grads gather_backward(const FormulaNode& n, const Grads& g) {
  Tensor zero = zeros(n.info(0).sizes, TensorOptions(g[0].dtype()).device(g[0].device()));
  return {zero.scatter_add(n.args<DimArgs>().dim, n.input(1), g[0]), Tensor()};
}

// self: the gradient as is; src: the gradient gathered at index, zero past the index's extent.
Grads scatter_add_backward(const FormulaNode& n, const Grads& g) {
  const int64_t dim = n.args<DimArgs>().dim;
  Tensor src_grad;
  if (n.needs_grad(2)) {
    const Tensor& index = n.input(1);
    src_grad = g[0].gather(dim, index);
    const IntList& src_sizes = n.info(2).sizes;
    if (src_grad.sizes() != src_sizes) {
      Tensor full = zeros(src_sizes, TensorOptions(g[0].dtype()).device(g[0].device()));
      Tensor part = full;
      for (int64_t d = 0; d < index.dim(); ++d) part = part.narrow(d, 0, index.size(d));
      part.copy_(src_grad);
      src_grad = full;
    }
  }
  return {n.needs_grad(0) ? g[0] : Tensor(), Tensor(), src_grad};
}

}  // namespace ember::autograd::detail::indexing_formulas
