// index_select as an element-wise gather.
//
// out has in0's shape with `dim` resized to the index count. Seen by the iteration
// engine, it is a map over out with two inputs: in0 with stride 0 along `dim` (the
// base of the selected slice) and the index with its stride along `dim` and 0
// elsewhere; each element reads base[index * in0.stride(dim)]. So coalescing,
// reordering and threading come for free. Indices are validated before anything is
// written, so a bad index leaves `out` untouched. Along dim 0 of contiguous rows (an
// embedding's lookup) whole rows are copied instead.
#include <cstring>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"

namespace ember::detail::cpu {
namespace {

template <typename I>
void check_indices(const TensorArg& index, int64_t limit) {
  LoopShape s = make_loop_shape({&index}, /*reorder=*/true);
  char* base[] = {static_cast<char*>(index.data)};
  bool bad = false;
  auto scan = [&](char* const* p, const int64_t* st, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = *reinterpret_cast<const I*>(p[0] + i * st[0]);
      bad = bad || v < 0 || v >= limit;
    }
  };
  for_each_row(s, base, 0, s.numel, scan);
  EMBER_CHECK(!bad, IndexError, "index out of range in self");
}

template <typename I, size_t kBytes>
void gather(const TensorArg& out, const TensorArg& base, const TensorArg& index, int64_t dim_stride_bytes) {
  LoopShape s = make_loop_shape({&out, &base, &index}, /*reorder=*/true);
  char* ptrs[] = {static_cast<char*>(out.data), static_cast<char*>(base.data), static_cast<char*>(index.data)};
  parallel_loop(s, ptrs, [dim_stride_bytes](char* const* p, const int64_t* st, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = *reinterpret_cast<const I*>(p[2] + i * st[2]);
      std::memcpy(p[0] + i * st[0], p[1] + i * st[1] + k * dim_stride_bytes, kBytes);
    }
  });
}

// Row-major contiguous: dim 0 selects whole rows of row_bytes each.
bool contiguous_rows(const TensorArg& t) {
  int64_t expected = 1;
  for (size_t d = t.sizes.size(); d-- > 0;) {
    if (t.sizes[d] != 1 && t.strides[d] != expected) return false;
    expected *= t.sizes[d];
  }
  return true;
}

template <typename I>
void copy_rows(const TensorArg& dst, const TensorArg& src, const TensorArg& index) {
  const int64_t row_bytes =
      (dst.sizes[0] == 0 ? 0 : dst.numel() / dst.sizes[0]) * static_cast<int64_t>(itemsize(src.dtype));
  const I* idx = static_cast<const I*>(index.data);
  const int64_t index_stride = index.sizes.empty() ? 0 : index.strides[0];
  char* out = static_cast<char*>(dst.data);
  const char* in = static_cast<const char*>(src.data);
  parallel_for(0, dst.sizes[0], std::max<int64_t>(1, kGrainSize * 4 / std::max<int64_t>(row_bytes, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t i = begin; i < end; ++i) {
                   std::memcpy(out + i * row_bytes, in + static_cast<int64_t>(idx[i * index_stride]) * row_bytes,
                               static_cast<size_t>(row_bytes));
                 }
               });
}

}  // namespace

void run_index_select(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1 && call.inputs.size() == 2, ValueError,
              "index_select: expected 1 output and 2 inputs");
  const TensorArg &out = call.outputs[0], &in = call.inputs[0], &index = call.inputs[1];
  EMBER_CHECK(index.dtype == kInt64 || index.dtype == kInt32, TypeError,
              "index_select(): Expected dtype int32 or int64 for index");
  EMBER_CHECK(index.sizes.size() <= 1, IndexError, "index_select(): Index is supposed to be a vector");
  EMBER_CHECK(out.dtype == in.dtype, TypeError, "index_select(): self and result must have the same scalar type");
  // A 0-d input behaves as a 1-element vector.
  TensorArg src = in;
  if (src.sizes.empty()) src.sizes = {1}, src.strides = {1};
  const int64_t dim = call.arg<kargs::Dim>().dim;
  const int64_t nd = static_cast<int64_t>(src.sizes.size());
  EMBER_CHECK(dim >= 0 && dim < nd, IndexError, "Dimension out of range (expected to be in range of [", -nd, ", ",
              nd - 1, "], but got ", dim, ")");
  const int64_t count = index.numel();
  TensorArg dst = out;
  if (dst.sizes.empty()) dst.sizes = {1}, dst.strides = {1};
  EMBER_CHECK(static_cast<int64_t>(dst.sizes.size()) == nd && dst.sizes[dim] == count, ValueError,
              "index_select(): output has the wrong shape");
  if (index.dtype == kInt64) check_indices<int64_t>(index, src.sizes[dim]);
  else check_indices<int32_t>(index, src.sizes[dim]);
  if (dst.numel() == 0) return;
  if (dim == 0 && contiguous_rows(src) && contiguous_rows(dst)) {  // embedding's lookup: whole rows
    if (index.dtype == kInt64) copy_rows<int64_t>(dst, src, index);
    else copy_rows<int32_t>(dst, src, index);
    return;
  }

  const int64_t dim_stride_bytes = src.strides[dim] * static_cast<int64_t>(itemsize(src.dtype));
  TensorArg base = src;  // broadcast along dim: every position starts at the slice base
  base.sizes = dst.sizes;
  base.strides[dim] = 0;
  TensorArg idx{index.data, index.dtype, dst.sizes, IntList(nd, 0)};
  idx.strides[dim] = index.sizes.empty() ? 0 : index.strides[0];
  auto run_typed = [&]<typename I>(TypeTag<I>) {
    switch (itemsize(src.dtype)) {
      case 1: return gather<I, 1>(dst, base, idx, dim_stride_bytes);
      case 2: return gather<I, 2>(dst, base, idx, dim_stride_bytes);
      case 4: return gather<I, 4>(dst, base, idx, dim_stride_bytes);
      case 8: return gather<I, 8>(dst, base, idx, dim_stride_bytes);
      default: return gather<I, 16>(dst, base, idx, dim_stride_bytes);
    }
  };
  if (index.dtype == kInt64) run_typed(TypeTag<int64_t>{});
  else run_typed(TypeTag<int32_t>{});
}

}  // namespace ember::detail::cpu
