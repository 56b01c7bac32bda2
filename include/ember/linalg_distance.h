// Pairwise distances and tensor contractions: torch.cdist and torch.tensordot. Both multiply
// matrices underneath (cdist on its Euclidean matrix-product path), so on cuda devices they
// follow backends::cuda::matmul.allow_tf32, as PyTorch's do; the cpu never rounds to TF32.
#pragma once

#include <cstdint>
#include <string>

#include "ember/tensor.h"

namespace ember {

/// torch.cdist: the p-norm distance between each row of x1 [B.., P, M] and each row of
/// x2 [B.., R, M] (batch dims broadcast), giving [B.., P, R]. p >= 0 (0 counts the differing
/// columns, infinity takes the largest); float32 and float64. compute_mode
/// "use_mm_for_euclid_dist_if_necessary" takes the matrix-product path for p == 2 when P > 25
/// or R > 25, "use_mm_for_euclid_dist" always for p == 2, "donot_use_mm_for_euclid_dist"
/// never. Unlike PyTorch's, the matrix-product path recomputes directly the distances whose
/// digits it lost to cancellation, so identical rows are exactly 0 apart and close distinct
/// rows are not (Note [cdist's matrix-product path] in src/ops/cdist.cpp).
Tensor cdist(const Tensor& x1, const Tensor& x2, double p = 2.0,
             const std::string& compute_mode = "use_mm_for_euclid_dist_if_necessary");

/// torch.tensordot: sums the products of a and b over a's dims `dims_a` paired with b's
/// `dims_b` (negative dims count from the end; a pair with one size-1 side is summed away
/// first). The result's dims are a's free dims then b's, in order. One matrix product.
Tensor tensordot(const Tensor& a, const Tensor& b, const IntList& dims_a, const IntList& dims_b);
/// tensordot over a's last `dims` dims and b's first `dims` (0: the outer product).
Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims);

}  // namespace ember
