#include "autograd/formulas_impl.h"

#include <algorithm>
#include <optional>

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

Tensor mm_backward_mat1(const Tensor& grad, const Tensor& mat2, const InputInfo& mat1) {
  if (column_major(mat1) && grad.dim() == 2) return conj(mat2).matmul(grad.transpose(0, 1)).transpose(0, 1);
  return grad.matmul(conj(mat2).transpose(-1, -2));
}

Tensor mm_backward_mat2(const Tensor& grad, const Tensor& mat1, const InputInfo& mat2) {
  if (column_major(mat2) && grad.dim() == 2) return grad.transpose(0, 1).matmul(conj(mat1)).transpose(0, 1);
  return conj(mat1).transpose(-1, -2).matmul(grad);
}

Tensor index_select_backward_self(const Tensor& grad, const IntList& sizes, int64_t dim, const Tensor& index) {
  if (sizes.empty()) return grad.reshape({});
  // A one-hot matrix M[k, j] = (index[k] == j) moves slice k back to position j: summing
  // over k is a matmul, which accumulates repeated indices.
  int64_t size = sizes[dim];
  Tensor positions = arange(size, TensorOptions(kInt64).device(grad.device()));
  Tensor one_hot = index.reshape({-1, 1}).to(kInt64).eq(positions.reshape({1, -1})).to(grad.dtype());
  Tensor moved = grad.transpose(dim, -1);  // [..., n_index]
  Tensor back = moved.matmul(one_hot);     // [..., size]
  return back.transpose(dim, -1);
}

namespace {

// Note [as_strided backward]
// As PyTorch's as_strided_backward: the gradient is scattered into a flat buffer standing
// for the storage span both geometries reach, adding where the output's geometry reaches
// one storage element several times (overlapping windows); where the input's geometry
// reaches one element several times (an expanded input), each of its reads gets an equal
// share; the input's geometry then reads the buffer. There is no scatter kernel: the
// output geometry is walked one index at a time along just enough dims (`dims_to_walk`)
// that what remains is free of overlap, and each such piece is added with one op.

struct Geometry {
  IntList sizes;
  IntList strides;
  int64_t offset = 0;
};

// PyTorch's maybe_overlapping_memory: false only when, with dims sorted by stride, each
// stride exceeds the span of the dims below it (size-1 dims ignored).
bool may_overlap(const IntList& sizes, const IntList& strides) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return false;
    if (sizes[d] > 1) dims.push_back(d);
  }
  std::sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t span = 0;  // highest offset reached by the dims so far
  for (size_t d : dims) {
    if (strides[d] <= span) return true;
    span += (sizes[d] - 1) * strides[d];
  }
  return false;
}

// The dims to walk one index at a time so that the others are free of overlap: one dim
// if a single one does (the smallest), else the smallest dims until the rest is free.
std::vector<size_t> dims_to_walk(const IntList& sizes, const IntList& strides) {
  std::vector<size_t> walked;
  IntList kept = sizes;
  while (may_overlap(kept, strides)) {
    std::optional<size_t> single, smallest;
    for (size_t d = 0; d < kept.size(); ++d) {
      if (kept[d] <= 1) continue;
      if (!smallest || kept[d] < kept[*smallest]) smallest = d;
      IntList without = kept;
      without[d] = 1;
      if (!may_overlap(without, strides) && (!single || kept[d] < kept[*single])) single = d;
    }
    size_t d = single ? *single : *smallest;
    walked.push_back(d);
    kept[d] = 1;
  }
  return walked;
}

// Adds `values` (of g's sizes) into `flat` (zero where g reaches) at geometry g.
void scatter_add(const Tensor& flat, Geometry g, Tensor values) {
  // Elements repeated through stride 0 all reach one storage element: sum them first.
  for (size_t d = 0; d < g.sizes.size(); ++d) {
    if (g.strides[d] == 0 && g.sizes[d] > 1) {
      values = values.sum(static_cast<int64_t>(d), true);
      g.sizes[d] = 1;
    }
  }
  std::vector<size_t> walked = dims_to_walk(g.sizes, g.strides);
  if (walked.empty()) {  // one write: the buffer is zero there
    flat.as_strided(g.sizes, g.strides, g.offset).copy_(values);
    return;
  }
  std::sort(walked.begin(), walked.end());
  IntList piece = g.sizes, index(walked.size(), 0);
  for (size_t d : walked) piece[d] = 1;
  for (;;) {
    int64_t offset = g.offset;
    Tensor part = values;
    for (size_t k = 0; k < walked.size(); ++k) {
      offset += index[k] * g.strides[walked[k]];
      part = part.narrow(static_cast<int64_t>(walked[k]), index[k], 1);
    }
    flat.as_strided(piece, g.strides, offset).add_(part);
    size_t k = walked.size();
    while (k > 0 && ++index[k - 1] == g.sizes[walked[k - 1]]) index[--k] = 0;
    if (k == 0) return;
  }
}

// Elements a buffer needs to hold geometry g.
int64_t extent_of(const Geometry& g) {
  for (int64_t s : g.sizes) {
    if (s == 0) return 0;
  }
  return last_index(g.sizes, g.strides, g.offset) + 1;
}

}  // namespace

Tensor as_strided_backward_self(const Tensor& grad, const InputInfo& in, const AsStridedArgs& args) {
  // Both geometries relative to the lower of their offsets (Note [as_strided backward]).
  const int64_t shared = std::min(in.offset, args.offset);
  Geometry input{in.sizes, in.strides, in.offset - shared};
  Geometry output{args.sizes, args.strides, args.offset - shared};
  TensorOptions options = TensorOptions(grad.dtype()).device(grad.device());
  Tensor flat = zeros({std::max(extent_of(input), extent_of(output))}, options);
  scatter_add(flat, output, grad);
  if (may_overlap(input.sizes, input.strides)) {
    Tensor count = zeros(flat.sizes(), options);
    scatter_add(count, input, ones(input.sizes, options));
    flat = flat / count;  // NaN where the input does not reach, which it does not read
  }
  return flat.as_strided(input.sizes, input.strides, input.offset).clone();
}

Tensor to_copy_backward_self(const Tensor& grad, const InputInfo& in, const CopyArgs& args) {
  TensorOptions back = TensorOptions(in.dtype).device(in.device);
  if (grad.device() == in.device || !args.source_stream) return grad.to(back);
  // Across devices, the destination (the forward's source) is written on the stream that
  // was current there in the forward, as the forward's copy read it there.
  cuda::StreamGuard guard(*args.source_stream);
  return grad.to(back);
}

}  // namespace ember::autograd::detail
