#include "autograd/formulas_impl.h"

#include "ember/autograd.h"
#include "ember/cuda.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"

namespace ember::autograd::detail {

Scalar negated(const Scalar& s) {
  if (s.is_complex()) return Scalar(-s.to_complex());
  if (s.is_floating_point()) return Scalar(-s.to_double());
  return Scalar(-s.to<int64_t>());
}

Scalar conj_scalar(const Scalar& s) { return s.is_complex() ? Scalar(std::conj(s.to_complex())) : s; }

Scalar minus_one(const Scalar& s) {
  if (s.is_complex()) return Scalar(s.to_complex() - 1.0);
  if (s.is_floating_point()) return Scalar(s.to_double() - 1.0);
  return Scalar(s.to<int64_t>() - 1);
}

int64_t last_index(const IntList& sizes, const IntList& strides, int64_t offset) {
  int64_t last = offset;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return offset;
    last += (sizes[d] - 1) * strides[d];
  }
  return last;
}

Tensor scaled(const Tensor& g, const Scalar& s) {
  if (!s.is_complex() && s.to_double() == 1.0) return g;
  return g * s;
}

namespace {
bool column_major(const InputInfo& in) {
  return in.sizes.size() == 2 && in.sizes[0] > 1 && in.sizes[1] > 1 && in.strides[0] == 1 &&
         in.strides[1] == in.sizes[0];
}
}  // namespace

Tensor mm_mat1_backward(const Tensor& grad, const Tensor& mat2, const InputInfo& mat1) {
  if (column_major(mat1) && grad.dim() == 2) return conj(mat2).matmul(grad.transpose(0, 1)).transpose(0, 1);
  return grad.matmul(conj(mat2).transpose(-1, -2));
}

Tensor mm_mat2_backward(const Tensor& grad, const Tensor& mat1, const InputInfo& mat2) {
  if (column_major(mat2) && grad.dim() == 2) return grad.transpose(0, 1).matmul(conj(mat1)).transpose(0, 1);
  return conj(mat1).transpose(-1, -2).matmul(grad);
}

Tensor index_select_backward(const Tensor& grad, const IntList& sizes, int64_t dim, const Tensor& index) {
  if (sizes.empty()) return grad.reshape({});
  // A one-hot matrix M[k, j] = (index[k] == j) moves slice k back to position j: summing
  // over k is a matmul, which accumulates repeated indices.
  int64_t size = sizes[dim];
  Tensor positions = arange(size, TensorOptions(kInt64).device(grad.device()));
  Tensor one_hot = index.reshape({-1, 1}).to(kInt64).eq(positions.reshape({1, -1})).to(grad.dtype());
  Tensor moved = grad.transpose(dim, -1);                // [..., n_index]
  Tensor back = moved.matmul(one_hot);                   // [..., size]
  return back.transpose(dim, -1);
}

Tensor as_strided_backward(const Tensor& grad, const InputInfo& in, const Attrs& attrs) {
  IntList sizes = attrs.ints, strides = attrs.ints2;
  Tensor g = grad;
  // Elements repeated through stride 0 all map to one storage element: sum them first.
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (strides[d] == 0 && sizes[d] > 1) {
      g = g.sum(static_cast<int64_t>(d), true);
      sizes[d] = 1;
    }
  }
  // The storage span both geometries touch, as a flat buffer.
  int64_t extent = std::max<int64_t>(attrs.dim, in.offset) + 1;
  extent = std::max(extent, last_index(sizes, strides, attrs.dim) + 1);
  extent = std::max(extent, last_index(in.sizes, in.strides, in.offset) + 1);
  Tensor flat = zeros({extent}, TensorOptions(g.dtype()).device(g.device()));
  Tensor target = flat.as_strided(sizes, strides, attrs.dim);
  target.copy_(g);  // copy_ refuses overlapping targets (other than stride 0, handled above)
  return flat.as_strided(in.sizes, in.strides, in.offset).clone();
}

Tensor to_copy_backward(const Tensor& grad, const InputInfo& in, const Attrs& attrs) {
  TensorOptions back = TensorOptions(in.dtype).device(in.device);
  if (grad.device() == in.device || !attrs.stream) return grad.to(back);
  // Across devices, the destination (the forward's source) is written on the stream that
  // was current there in the forward, as the forward's copy read it there.
  cuda::StreamGuard guard(*attrs.stream);
  return grad.to(back);
}

}  // namespace ember::autograd::detail
