// Operations as free functions. Each runs on the device of its tensors.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "ember/tensor.h"

namespace ember {

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a);

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Scalar& exponent);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor tanh(const Tensor& a);

Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);

Tensor sum(const Tensor& a);
Tensor sum(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& a);
Tensor mean(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& a);
Tensor max(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& a);
Tensor min(const Tensor& a, int64_t dim, bool keepdim = false);

Tensor matmul(const Tensor& a, const Tensor& b);
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);

/// Concatenates along `dim` (all tensors of one dtype after promotion, same device).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// Stacks equal-shaped tensors along a new dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& a, const IntList& split_sizes, int64_t dim = 0);
/// a where cond is true, else b (broadcast; a and b promoted to one dtype).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
Tensor clamp(const Tensor& a, const std::optional<Scalar>& min, const std::optional<Scalar>& max = std::nullopt);
Tensor clamp(const Tensor& a, const Tensor& min, const Tensor& max);
Tensor softmax(const Tensor& a, int64_t dim);
Tensor log_softmax(const Tensor& a, int64_t dim);
Tensor argmax(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor masked_fill(const Tensor& a, const Tensor& mask, const Scalar& value);
Tensor masked_fill(const Tensor& a, const Tensor& mask, const Tensor& value);
/// beta * bias + alpha * (a @ b), a and b 2-D, bias broadcast to the product.
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta = 1, const Scalar& alpha = 1);
/// Batched matrix product of two 3-D tensors (no broadcasting).
Tensor bmm(const Tensor& a, const Tensor& b);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
bool equal(const Tensor& a, const Tensor& b);

// Transformer ops. matmul above broadcasts batch dims as torch.matmul.
/// beta * input + alpha * (batch1 @ batch2), batch1 {B, n, m} and batch2 {B, m, p}; input
/// broadcasts to {B, n, p}; beta == 0 ignores input (NaN in it does not propagate).
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, const Scalar& beta = 1,
               const Scalar& alpha = 1);
/// Out-of-place index_add (Tensor::index_add_).
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1);

/// The dtype PyTorch's promotion gives an op on a and b (torch.result_type).
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, const Scalar& b);

// ---- math, scans, statistics, sorting, indexing and sampling (transformer ops) ----
Tensor rsqrt(const Tensor& a);
Tensor erf(const Tensor& a);  // real floating inputs (integers promote), as PyTorch
/// atan2(a, b) element-wise (the angle of the point (b, a)), broadcasting; integral inputs promote
/// to the default floating dtype, complex ones are refused, as PyTorch.
Tensor atan2(const Tensor& a, const Tensor& b);
/// Cumulative sum along `dim`; integral and bool inputs give int64, as PyTorch.
Tensor cumsum(const Tensor& a, int64_t dim);
/// log(sum(exp(a))) over `dims` (empty: every dim), computed around the maximum so it
/// neither overflows nor underflows.
Tensor logsumexp(const Tensor& a, const IntList& dims, bool keepdim = false);
/// Sum (mean) over `dims` (empty: every dim) in one pass, each result rounded once. `dtype`: the
/// result's dtype, as PyTorch's argument (the input is summed as that dtype: a float16 input
/// with dtype float32 is read as is, accumulated in float and never rounded to float16).
/// A braced single dim or an empty {} picks sum(a, int64_t dim) (dim 0 for {}): write
/// IntList{} for every dim.
Tensor sum(const Tensor& a, const IntList& dims, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& a, const IntList& dims, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
/// Variance over `dims` (empty: every dim) with `correction` (1: Bessel's, 0: biased);
/// two passes (the mean, then the squared deviations from it).
Tensor var(const Tensor& a, const IntList& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& a, const IntList& dims = {}, int64_t correction = 1, bool keepdim = false);
/// The upper (lower) triangle of the last two dims, from `diagonal` on (up to it); the
/// rest zero. Leading dims are batch dims.
Tensor triu(const Tensor& a, int64_t diagonal = 0);
Tensor tril(const Tensor& a, int64_t diagonal = 0);
/// Values sorted along `dim` and their int64 positions in `a`. Stable: equal values keep
/// their order (ascending or descending); NaN sorts as the largest value.
std::pair<Tensor, Tensor> sort(const Tensor& a, int64_t dim = -1, bool descending = false);
/// The k largest (smallest) values along `dim` and their int64 indices, in sorted order
/// whatever `sorted` says; ties keep the order of `a`, NaN counts as the largest.
std::pair<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);
/// out[i][j] = a[index[i][j]][j] for dim 0 (and so on): int64 index, as a's dims.
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
/// A copy of `a` with src's elements added at `index` along `dim` (Tensor::scatter_add_).
Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
/// `num_samples` category indices (int64) drawn from each row of `probs` (1-D or 2-D,
/// non-negative weights, not necessarily normalised) with `generator` or the default one; the same
/// numbers on every backend for a seed. Without replacement no category repeats in a row.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false,
                   std::optional<Generator> generator = std::nullopt);

}  // namespace ember
