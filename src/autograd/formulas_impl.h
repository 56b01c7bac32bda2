// The longer derivative formulas (formulas_impl.cpp), as PyTorch's *_backward helpers.
#pragma once

#include "autograd/formula_node.h"

namespace ember::autograd::detail {

Scalar negated(const Scalar& s);
Scalar conj_scalar(const Scalar& s);
/// s - 1
Scalar minus_one(const Scalar& s);

/// Gradient of index_select(dim, index) for an input of `sizes`: each output slice added
/// back at its index (repeated indices accumulate).
Tensor index_select_backward(const Tensor& grad, const IntList& sizes, int64_t dim, const Tensor& index);
/// Gradient of as_strided(attrs.ints sizes, attrs.ints2 strides, attrs.dim offset) of an
/// input with geometry `in`.
Tensor as_strided_backward(const Tensor& grad, const InputInfo& in, const Attrs& attrs);
/// Gradient of a dtype/device conversion: back to the input's dtype and device; a copy
/// across devices runs on the source side's forward stream (attrs.stream).
Tensor to_copy_backward(const Tensor& grad, const InputInfo& in, const Attrs& attrs);

}  // namespace ember::autograd::detail
