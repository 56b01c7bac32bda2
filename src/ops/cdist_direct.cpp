// cdist's direct path (PyTorch's cdist kernel and _cdist_backward, composed of ops).
#include "ops/cdist_direct.h"

#include <algorithm>
#include <cmath>

#include "ember/factories.h"
#include "ember/ops.h"

namespace ember::detail {

// Note [cdist's blocks]
// The direct path works on the differences of every pair of rows, [B, P, R, M] if made at
// once. It is made a block of rows at a time instead, whole batches while a batch fits the
// budget, else a run of one batch's rows, so memory stays near kBlockElements elements
// (a few temporaries of that size) however large the inputs; the backward recomputes each
// block's differences instead of keeping them.
namespace {

constexpr int64_t kBlockElements = int64_t{1} << 20;

Tensor sign(const Tensor& t) { return t.gt(0.0).to(t.dtype()) - t.lt(0.0).to(t.dtype()); }

// Calls fn(b0, nb, i0, ni) for each block: batches [b0, b0 + nb), rows [i0, i0 + ni).
template <typename F>
void for_each_block(int64_t B, int64_t P, int64_t R, int64_t M, F&& fn) {
  const int64_t rows = cdist_rows_per_block(R, M);
  if (rows >= P) {
    const int64_t batches = std::max<int64_t>(1, rows / std::max<int64_t>(P, 1));
    for (int64_t b0 = 0; b0 < B; b0 += batches) fn(b0, std::min(batches, B - b0), int64_t{0}, P);
    return;
  }
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i0 = 0; i0 < P; i0 += rows) fn(b, int64_t{1}, i0, std::min(rows, P - i0));
  }
}

// g / dist^power, 0 where the distance is 0 (a pair at distance 0 contributes nothing).
Tensor ratio(const Tensor& grad, const Tensor& dist, double power) {
  Tensor denominator = power == 1.0 ? dist : dist.pow(power);
  return (grad / denominator).masked_fill(dist.eq(0.0), 0.0);
}

}  // namespace

int64_t cdist_rows_per_block(int64_t R, int64_t M) {
  return std::max<int64_t>(1, kBlockElements / std::max<int64_t>(1, R * M));
}

Tensor cdist_block(const Tensor& a, const Tensor& b, double p) {
  Tensor diff = a.unsqueeze(2) - b.unsqueeze(1);
  if (p == 0.0) return diff.ne(0.0).to(a.dtype()).sum(-1);
  if (p == 1.0) return diff.abs().sum(-1);
  if (p == 2.0) return (diff * diff).sum(-1).sqrt();
  if (std::isinf(p)) return diff.abs().max(-1);
  return diff.abs().pow(p).sum(-1).pow(1.0 / p);
}

std::pair<Tensor, Tensor> cdist_block_backward(const Tensor& grad, const Tensor& a, const Tensor& b, const Tensor& dist,
                                               double p) {
  if (p == 0.0) return {zeros_like(a), zeros_like(b)};
  Tensor diff = a.unsqueeze(2) - b.unsqueeze(1);
  Tensor coefficient;  // d dist / d diff times the gradient, per pair and column
  if (p == 1.0) {
    coefficient = sign(diff) * grad.unsqueeze(-1);
  } else if (p == 2.0) {
    coefficient = diff * ratio(grad, dist, 1.0).unsqueeze(-1);
  } else if (std::isinf(p)) {
    // Every column at the maximum gets the whole gradient (PyTorch's, not a share of it).
    coefficient = sign(diff) * grad.unsqueeze(-1) * diff.abs().eq(dist.unsqueeze(-1)).to(diff.dtype());
  } else if (p < 2.0) {
    coefficient = sign(diff) * diff.abs().pow(p - 1.0) * ratio(grad, dist, p - 1.0).unsqueeze(-1);
    if (p < 1.0) coefficient = coefficient.masked_fill(diff.eq(0.0), 0.0);
  } else {
    coefficient = diff * diff.abs().pow(p - 2.0) * ratio(grad, dist, p - 1.0).unsqueeze(-1);
  }
  return {coefficient.sum(2), -coefficient.sum(1)};
}

Tensor cdist_direct(const Tensor& x1, const Tensor& x2, double p) {
  const int64_t B = x1.size(0), P = x1.size(1), R = x2.size(1), M = x1.size(2);
  // No columns: every distance is 0 (PyTorch's zeros; no reduction over an empty dim).
  if (B * P * R * M == 0) return zeros({B, P, R}, TensorOptions(x1.dtype()).device(x1.device()));
  if (B * P <= cdist_rows_per_block(R, M)) return cdist_block(x1, x2, p);
  Tensor out = empty({B, P, R}, TensorOptions(x1.dtype()).device(x1.device()));
  for_each_block(B, P, R, M, [&](int64_t b0, int64_t nb, int64_t i0, int64_t ni) {
    Tensor block = cdist_block(x1.narrow(0, b0, nb).narrow(1, i0, ni), x2.narrow(0, b0, nb), p);
    out.narrow(0, b0, nb).narrow(1, i0, ni).copy_(block);
  });
  return out;
}

std::pair<Tensor, Tensor> cdist_direct_backward(const Tensor& grad, const Tensor& x1, const Tensor& x2,
                                                const Tensor& dist, double p) {
  const int64_t B = x1.size(0), P = x1.size(1), R = x2.size(1), M = x1.size(2);
  if (B * P * R * M == 0) return {zeros_like(x1), zeros_like(x2)};
  if (B * P <= cdist_rows_per_block(R, M)) return cdist_block_backward(grad, x1, x2, dist, p);
  Tensor grad_x1 = zeros_like(x1), grad_x2 = zeros_like(x2);
  for_each_block(B, P, R, M, [&](int64_t b0, int64_t nb, int64_t i0, int64_t ni) {
    auto [ga, gb] =
        cdist_block_backward(grad.narrow(0, b0, nb).narrow(1, i0, ni), x1.narrow(0, b0, nb).narrow(1, i0, ni),
                             x2.narrow(0, b0, nb), dist.narrow(0, b0, nb).narrow(1, i0, ni), p);
    grad_x1.narrow(0, b0, nb).narrow(1, i0, ni).copy_(ga);
    grad_x2.narrow(0, b0, nb).add_(gb);
  });
  return {grad_x1, grad_x2};
}

}  // namespace ember::detail
