// cdist's direct path: distances and their gradients from the differences of the rows
// themselves, in blocks (Note [cdist's blocks] in cdist_direct.cpp). Used by cdist for every p
// and by its matrix-product path for the distances that path recomputes.
#pragma once

#include <cstdint>
#include <utility>

#include "ember/tensor.h"

namespace ember::detail {

/// The p-norm distances of a [B, c, M]'s rows to b [B, R, M]'s: [B, c, R], from one [B, c, R, M]
/// difference (the caller bounds its size). p >= 0, M > 0.
Tensor cdist_block(const Tensor& a, const Tensor& b, double p);

/// PyTorch's _cdist_backward over one block: given grad and dist [B, c, R] of
/// cdist_block(a, b, p), the gradients for a [B, c, M] and b [B, R, M]. Where a distance is 0
/// its pair contributes nothing (not NaN); p = inf gives each column at the maximum the whole
/// gradient; p < 1 gives a zero difference nothing.
std::pair<Tensor, Tensor> cdist_block_backward(const Tensor& grad, const Tensor& a, const Tensor& b, const Tensor& dist,
                                               double p);

/// cdist_block over x1 [B, P, M] and x2 [B, R, M] whole, block by block: [B, P, R].
Tensor cdist_direct(const Tensor& x1, const Tensor& x2, double p);

/// cdist_block_backward over x1 and x2 whole, block by block.
std::pair<Tensor, Tensor> cdist_direct_backward(const Tensor& grad, const Tensor& x1, const Tensor& x2,
                                                const Tensor& dist, double p);

/// How many rows of a [*, R, M] block's difference fit the block budget (at least 1).
int64_t cdist_rows_per_block(int64_t R, int64_t M);

}  // namespace ember::detail
