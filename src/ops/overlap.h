// Memory-overlap checks for ops that write into existing tensors (in-place ops, copy_).
//
// Kernels may vectorise and split work over threads, so an output must not share
// memory with itself (a broadcast, stride-0 view) or partly with an input. PyTorch
// raises the same error in these cases.
#pragma once

#include "ember/tensor.h"

namespace ember::detail {

/// Throws ValueError when `t` has elements that share memory (a stride-0 dim of size > 1).
void check_no_internal_overlap(const Tensor& t);
/// Throws ValueError when `out` and `in` share memory without being the same view: what
/// element-wise ops refuse (PyTorch's assert_no_partial_overlap), which allow `a.add_(a)`.
void check_no_partial_overlap(const Tensor& out, const Tensor& in);
/// Throws ValueError when `out` and `in` share memory at all, the same view included: what
/// index and scatter ops refuse (PyTorch's assert_no_overlap), whose result would depend on
/// the order elements are processed in when self is also their source or index.
void check_no_overlap(const Tensor& out, const Tensor& in);
/// True when `a` and `b` are the same elements in the same order (the same view).
bool same_view(const Tensor& a, const Tensor& b);

}  // namespace ember::detail
