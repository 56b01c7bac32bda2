#include "ops/overlap.h"

#include <algorithm>
#include <vector>

#include "core/tensor_impl.h"
#include "ember/errors.h"

namespace ember::detail {

namespace {

// PyTorch's messages (ATen/MemoryOverlap.cpp): assert_no_internal_overlap, assert_no_partial_overlap.
constexpr const char* kInternalOverlap =
    "unsupported operation: more than one element of the written-to tensor refers to a single memory location. "
    "Please clone() the tensor before performing the operation.";
constexpr const char* kOverlap =
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory "
    "location. Please clone() the tensor before performing the operation.";

// [first, last] byte addresses the view touches.
std::pair<const char*, const char*> extent(const Tensor& t) {
  const char* base = static_cast<const char*>(t.impl()->data());  // not a host access
  int64_t lo = 0, hi = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    int64_t span = (t.sizes()[d] - 1) * t.strides()[d];
    (span < 0 ? lo : hi) += span;
  }
  int64_t esize = static_cast<int64_t>(t.element_size());
  return {base + lo * esize, base + hi * esize + esize - 1};
}

// Whether the view covers a dense block of memory once (a permutation of a contiguous
// layout). Only then is an extent comparison exact; PyTorch checks the same cases.
bool non_overlapping_and_dense(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.sizes()[d] != 1) dims.emplace_back(t.strides()[d], t.sizes()[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (auto [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

}  // namespace

void check_no_internal_overlap(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    EMBER_CHECK(t.strides()[d] != 0 || t.sizes()[d] <= 1, ValueError, kInternalOverlap);
  }
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.impl()->data() == b.impl()->data() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.dtype() == b.dtype();
}

void check_no_partial_overlap(const Tensor& out, const Tensor& in) {
  if (out.numel() == 0 || in.numel() == 0) return;
  if (out.impl()->storage() != in.impl()->storage()) return;
  if (same_view(out, in)) return;
  if (!non_overlapping_and_dense(out) || !non_overlapping_and_dense(in)) return;  // too hard to tell, as PyTorch
  auto [out_lo, out_hi] = extent(out);
  auto [in_lo, in_hi] = extent(in);
  EMBER_CHECK(out_hi < in_lo || in_hi < out_lo, ValueError, kOverlap);
}

void check_no_overlap(const Tensor& out, const Tensor& in) {
  // As PyTorch's get_overlap_status: one tensor twice is a full overlap, even when empty.
  const bool full = out.impl() == in.impl() || (out.numel() != 0 && in.numel() != 0 && same_view(out, in));
  EMBER_CHECK(!full, ValueError, kOverlap);
  check_no_partial_overlap(out, in);
}

}  // namespace ember::detail
