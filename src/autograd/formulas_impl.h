// The longer derivative formulas (formulas_impl.cpp), as PyTorch's *_backward helpers.
#pragma once

#include "autograd/formula_node.h"

namespace ember::autograd::detail {

Scalar negated(const Scalar& s);
Scalar conj_scalar(const Scalar& s);
/// s - 1
Scalar minus_one(const Scalar& s);
/// The storage index of the last element of a geometry (`offset` when it has no elements).
int64_t last_index(const IntList& sizes, const IntList& strides, int64_t offset);
/// g * s, or g itself when s is 1.
Tensor scaled(const Tensor& g, const Scalar& s);

/// The gradients of mat1 and mat2 in mat1 @ mat2 (2-D or batched), given the other
/// operand and the geometry of the one differentiated (PyTorch's mm_mat1_backward and
/// mm_mat2_backward): for a 2-D operand stored column-major (a transposed contiguous
/// matrix, as weight.t() in linear), the product is computed transposed so that the
/// gradient comes out in that layout: the weight's gradient is then contiguous and
/// AccumulateGrad keeps it without a copy. The result may be broadcast (batched case).
Tensor mm_backward_mat1(const Tensor& grad, const Tensor& mat2, const InputInfo& mat1);
Tensor mm_backward_mat2(const Tensor& grad, const Tensor& mat1, const InputInfo& mat2);

/// Gradient of index_select(dim, index) for an input of `sizes`: each output slice added
/// back at its index (repeated indices accumulate).
Tensor index_select_backward_self(const Tensor& grad, const IntList& sizes, int64_t dim, const Tensor& index);
/// Gradient of as_strided(args.sizes, args.strides, args.offset) of an input with geometry `in`.
Tensor as_strided_backward_self(const Tensor& grad, const InputInfo& in, const AsStridedArgs& args);
/// Gradient of a dtype/device conversion: back to the input's dtype and device; a copy
/// across devices runs on the source side's forward stream (args.source_stream).
Tensor to_copy_backward_self(const Tensor& grad, const InputInfo& in, const CopyArgs& args);

}  // namespace ember::autograd::detail
