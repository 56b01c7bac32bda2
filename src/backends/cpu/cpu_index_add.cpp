// IndexAdd (contract in kernels/transformer_kernels.h): self.select(dim, index[k]) +=
// alpha * source.select(dim, k).
//
// The loop runs over the positions of a slice (self and source with `dim` removed), a
// run of them at a time as the iteration engine hands them out; within a run it walks
// k = 0, 1, ... in order and adds slice k of source into slice index[k] of self. Threads
// own disjoint positions, so every element of self takes its contributions in index
// order whatever the thread count: the result is deterministic. Indices are checked
// before anything is written.
#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/loop_shape.h"

namespace ember::detail::cpu {
namespace {

template <typename I>
void check_indices(const TensorArg& index, int64_t count, int64_t limit) {
  const I* p = static_cast<const I*>(index.data);
  const int64_t stride = index.strides.empty() ? 0 : index.strides[0];
  for (int64_t k = 0; k < count; ++k) {
    const auto v = static_cast<int64_t>(p[k * stride]);
    EMBER_CHECK(v >= 0 && v < limit, IndexError, "index out of range in self");
  }
}

template <typename T, typename I>
void index_add_typed(const TensorArg& self, const TensorArg& source, const TensorArg& index, size_t d,
                     const Scalar& alpha) {
  using C = compute_t<T>;
  const C a = alpha.to<C>();
  const bool unit = alpha.to<C>() == C(1);
  const int64_t self_step = (self.sizes.empty() ? 0 : self.strides[d]) * static_cast<int64_t>(sizeof(T));
  const int64_t source_step = (source.sizes.empty() ? 0 : source.strides[d]) * static_cast<int64_t>(sizeof(T));
  TensorArg self_slice = without_dim(self, d), source_slice = without_dim(source, d);
  LoopShape s = make_loop_shape({&self_slice, &source_slice}, /*reorder=*/true);
  char* base[] = {static_cast<char*>(self.data), static_cast<char*>(source.data)};
  const int64_t count = index.numel();
  const I* idx = static_cast<const I*>(index.data);
  const int64_t index_stride = index.strides.empty() ? 0 : index.strides[0];
  auto body = [=](char* const* p, const int64_t* st, int64_t n) {
    for (int64_t k = 0; k < count; ++k) {
      char* dst = p[0] + static_cast<int64_t>(idx[k * index_stride]) * self_step;
      const char* src = p[1] + k * source_step;
      if (st[0] == static_cast<int64_t>(sizeof(T)) && st[1] == static_cast<int64_t>(sizeof(T))) {
        // Dense rows; the op layer refuses a source overlapping self.
        T* out = reinterpret_cast<T*>(dst);
        const T* in = reinterpret_cast<const T*>(src);
#pragma GCC ivdep
        for (int64_t i = 0; i < n; ++i)
          out[i] = convert<T>(convert<C>(out[i]) + (unit ? convert<C>(in[i]) : a * convert<C>(in[i])));
        continue;
      }
      for (int64_t i = 0; i < n; ++i) {
        T& out = *reinterpret_cast<T*>(dst + i * st[0]);
        const C v = convert<C>(*reinterpret_cast<const T*>(src + i * st[1]));
        out = convert<T>(convert<C>(out) + (unit ? v : a * v));
      }
    }
  };
  // Runs of at least 64 positions: each walk over k then streams whole rows of a slice.
  parallel_loop(s, base, body, std::max<int64_t>(64, kGrainSize / std::max<int64_t>(count, 1)));
}

}  // namespace

void run_index_add(const KernelCall& call) {
  EMBER_CHECK(call.outputs.size() == 1 && call.inputs.size() == 3, ValueError,
              "index_add_: expected 1 output and 3 inputs");
  const TensorArg &self = call.outputs[0], &index = call.inputs[1], &source = call.inputs[2];
  EMBER_CHECK(index.dtype == kInt64 || index.dtype == kInt32, TypeError,
              "index_add_(): Expected dtype int32/int64 for index but got: ", scalar_type_name(index.dtype));
  EMBER_CHECK(source.dtype == self.dtype, TypeError, "index_add_(): self (", scalar_type_name(self.dtype),
              ") and source (", scalar_type_name(source.dtype), ") must have the same scalar type");
  const auto& args = call.arg<kargs::IndexAdd>();
  const auto d = static_cast<size_t>(args.dim);
  const int64_t limit = self.sizes.empty() ? 1 : self.sizes[d];
  const int64_t count = index.numel();
  if (index.dtype == kInt64) check_indices<int64_t>(index, count, limit);
  else check_indices<int32_t>(index, count, limit);
  if (self.numel() == 0 || count == 0) return;
  dispatch(self.dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (std::is_same_v<T, bool>) {
      not_implemented("index_add_cpu_", self.dtype);
    } else if (index.dtype == kInt64) {
      index_add_typed<T, int64_t>(self, source, index, d, args.alpha);
    } else {
      index_add_typed<T, int32_t>(self, source, index, d, args.alpha);
    }
  });
}

}  // namespace ember::detail::cpu
