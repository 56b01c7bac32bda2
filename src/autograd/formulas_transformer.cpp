// Derivative formulas of the transformer ops: embedding, index_add, layer_norm, gelu and
// gelu's backward. When the backward itself is recorded (create_graph), each is written
// with differentiable ops (gelu's as the recorded gelu_backward op); otherwise layer_norm
// and gelu take their kernel forms (ops/nn/transformer_backward.h): one launch each.
#include "autograd/formulas_transformer.h"

#include "ember/autograd.h"
#include "ember/factories.h"
#include "ember/nn/functional.h"
#include "ember/ops.h"
#include "ops/nn/transformer_backward.h"

namespace ember::autograd::detail::transformer_formulas {

using ember::detail::EmbeddingArgs;
using ember::detail::GeluArgs;
using ember::detail::IndexAddArgs;
using ember::detail::LayerNormArgs;

// Input: weight. The gradient rows are added into zeros of weight's shape in index order
// (index_add_, deterministic); padding_idx's row gets nothing.
Grads embedding_backward(const FormulaNode& n, const Grads& g) {
  const auto& a = n.args<EmbeddingArgs>();
  const IntList& sizes = n.info(0).sizes;
  Tensor grad = zeros(sizes, TensorOptions(g[0].dtype()).device(g[0].device()));
  grad.index_add_(0, a.indices.reshape({-1}), g[0].reshape({-1, sizes[1]}));
  if (a.padding_idx) grad.select(0, *a.padding_idx).zero_();
  return {grad};
}

// Inputs: self, source.
Grads index_add_backward(const FormulaNode& n, const Grads& g) {
  const auto& a = n.args<IndexAddArgs>();
  Tensor g_source;
  if (n.needs_grad(1)) {
    Tensor flat = g[0].dim() == 0 ? g[0].reshape({1}) : g[0];
    g_source = flat.index_select(a.dim, a.index).reshape(n.info(1).sizes);
    if (a.alpha.is_complex() || a.alpha.to<double>() != 1.0) g_source = g_source * a.alpha;
  }
  return {n.needs_grad(0) ? g[0] : Tensor(), g_source};
}

// Inputs: x, weight, bias (either may be undefined); outputs: y, mean, rstd (the latter
// two are the saved statistics: their gradients are not used, as PyTorch's native_layer_norm
// does in its first-order backward).
Grads layer_norm_backward(const FormulaNode& n, const Grads& g) {
  const auto& a = n.args<LayerNormArgs>();
  Tensor x = n.input(0), w = n.input(1);
  const bool need_x = n.needs_grad(0), need_w = n.needs_grad(1), need_b = n.needs_grad(2);
  if (!is_grad_enabled()) {
    auto grads = ember::detail::nn::layer_norm_backward(g[0], x, n.output(1), n.output(2), w, a.normalized_dims, need_x,
                                                        need_w, need_b);
    return {grads.input, grads.weight, grads.bias};
  }
  // Recorded backward (double backward): the statistics recomputed from x, differentiably.
  const IntList& sizes = n.info(0).sizes;
  int64_t cols = 1;
  for (size_t d = sizes.size() - static_cast<size_t>(a.normalized_dims); d < sizes.size(); ++d) cols *= sizes[d];
  Tensor x2 = x.reshape({-1, cols});
  Tensor centered = x2 - x2.mean(1, true);
  Tensor rstd = pow((centered * centered).mean(1, true) + a.eps, -0.5);
  Tensor normalized = centered * rstd;
  Tensor g2 = g[0].reshape({-1, cols});
  Grads out(3);
  if (need_x) {
    Tensor gh = w.defined() ? g2 * w.reshape({1, cols}) : g2;
    Tensor gx = rstd * (gh - gh.mean(1, true) - normalized * (gh * normalized).mean(1, true));
    out[0] = gx.reshape(sizes);
  }
  if (need_w) out[1] = (g2 * normalized).sum(0).reshape(n.info(1).sizes);
  if (need_b) out[2] = g2.sum(0).reshape(n.info(2).sizes);
  return out;
}

Grads gelu_backward(const FormulaNode& n, const Grads& g) {
  const bool tanh_form = n.args<GeluArgs>().approximate_tanh;
  Tensor x = n.input(0);
  if (!is_grad_enabled()) return {ember::detail::nn::gelu_backward(g[0], x, tanh_form)};
  // Recorded backward (double backward).
  return {ember::detail::nn::gelu_backward_recorded(g[0], x, tanh_form)};
}

// Inputs: g (the output's gradient), x; output g * gelu'(x). Its gradients: gg * gelu'(x)
// for g (the same op again, so it differentiates further), gg * g * gelu''(x) for x.
Grads gelu_backward_backward(const FormulaNode& n, const Grads& g) {
  const bool tanh_form = n.args<GeluArgs>().approximate_tanh;
  Tensor grad = n.input(0), x = n.input(1);
  Grads out(2);
  if (n.needs_grad(0)) {
    out[0] = is_grad_enabled() ? ember::detail::nn::gelu_backward_recorded(g[0], x, tanh_form)
                               : ember::detail::nn::gelu_backward(g[0], x, tanh_form);
  }
  if (n.needs_grad(1)) {
    Tensor second;
    if (tanh_form) {
      // gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) u', with t = tanh(u), u = beta (x + kappa x^3),
      // u' = beta (1 + 3 kappa x^2), u'' = 6 beta kappa x.
      const double beta = 0.7978845608028654, kappa = 0.044715;
      Tensor t = ember::tanh((x + x * x * x * kappa) * beta);
      Tensor sech2 = 1 - t * t;
      Tensor du = (x * x * (3 * kappa) + 1) * beta;
      second = sech2 * du - x * sech2 * t * du * du + x * 0.5 * sech2 * (x * (6 * beta * kappa));
    } else {
      // gelu''(x) = phi(x) (2 - x^2), phi the standard normal density.
      second = ember::exp(x * x * -0.5) * 0.3989422804014327 * (2 - x * x);
    }
    out[1] = g[0] * grad * second;
  }
  return out;
}

}  // namespace ember::autograd::detail::transformer_formulas
