// IndexAdd on the driver backend (contract in kernels/transformer_kernels.h).
//
// One thread per position of a slice (self and source with `dim` removed); each walks
// k = 0, 1, ... in order and adds source's slice k into self's slice index[k] at its
// position. No two threads write one element and each element sums in index order, so
// the result is deterministic and the same as the cpu's (no atomics). While
// dim_size * count is small, a second kernel spreads the work over (destination,
// position) pairs instead, with the same order of additions. An index out of
// range fails a device assert, as index_select's (cuda_index_select.cu): CUDA marks the
// context and the next synchronizing call raises "CUDA error: device-side assert triggered".
#ifdef NDEBUG
#undef NDEBUG
#endif
#include <cassert>

#include "backends/cuda/cuda_loops.cuh"
#include "kernels/loop_shape.h"

namespace ember::detail::driver {
namespace {

template <typename T, typename Index>
__global__ void index_add_kernel(int64_t positions, char* self, const char* source, const Index* index,
                                 int64_t index_stride, int64_t count, int64_t dim_size, int64_t self_step,
                                 int64_t source_step, compute_t<T> alpha, OffsetCalc<2> calc) {
  using C = compute_t<T>;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < positions; i += stride) {
    int64_t offsets[2];
    calc.get(i, offsets);
    for (int64_t k = 0; k < count; ++k) {
      const int64_t j = static_cast<int64_t>(index[k * index_stride]);
      assert(j >= 0 && j < dim_size && "index out of range in self");
      T* out = reinterpret_cast<T*>(self + offsets[0] + j * self_step);
      const C v = convert<C>(*reinterpret_cast<const T*>(source + offsets[1] + k * source_step));
      *out = convert<T>(convert<C>(*out) + alpha * v);
    }
  }
}

// One thread per (destination j, position): it scans the whole index in order and adds
// the slices whose index is j, rounding to T after each add as the kernel above does, so
// both kernels (and the cpu) give the same bits. O(dim_size * count) index reads: used
// while that stays small (a vocabulary-sized embedding gradient), for the parallelism.
template <typename T, typename Index>
__global__ void index_add_scan_kernel(int64_t positions, char* self, const char* source, const Index* index,
                                      int64_t index_stride, int64_t count, int64_t dim_size, int64_t self_step,
                                      int64_t source_step, compute_t<T> alpha, OffsetCalc<2> calc) {
  using C = compute_t<T>;
  const int64_t total = dim_size * positions;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t j = i / positions;
    int64_t offsets[2];
    calc.get(i % positions, offsets);
    T* out = reinterpret_cast<T*>(self + offsets[0] + j * self_step);
    T value = *out;
    for (int64_t k = 0; k < count; ++k) {
      const int64_t target = static_cast<int64_t>(index[k * index_stride]);
      assert(target >= 0 && target < dim_size && "index out of range in self");
      if (target != j) continue;
      const C v = convert<C>(*reinterpret_cast<const T*>(source + offsets[1] + k * source_step));
      value = convert<T>(convert<C>(value) + alpha * v);
    }
    *out = value;
  }
}

/// Above this many (destination, index) pairs the scan kernel's reads outweigh its parallelism.
constexpr int64_t kScanBudget = int64_t{1} << 24;

}  // namespace

void launch_index_add(const KernelCall& call, cudaStream_t stream) {
  const TensorArg &self = call.outputs.at(0), &index = call.inputs.at(1), &source = call.inputs.at(2);
  EMBER_CHECK(index.dtype == kInt64 || index.dtype == kInt32, TypeError,
              "index_add_(): Expected dtype int32/int64 for index but got: ", scalar_type_name(index.dtype));
  const auto& args = call.arg<kargs::IndexAdd>();
  const auto d = static_cast<size_t>(args.dim);
  const int64_t count = index.numel();
  if (self.numel() == 0 || count == 0) return;
  const int64_t dim_size = self.sizes.empty() ? 1 : self.sizes[d];
  const int64_t index_stride = index.strides.empty() ? 0 : index.strides[0];
  TensorArg self_slice = without_dim(self, d), source_slice = without_dim(source, d);
  LoopShape shape = make_loop_shape({&self_slice, &source_slice}, /*reorder=*/true);
  OffsetCalc<2> calc = make_offset_calc<2>(shape);
  dispatch_if<NumericType>(self.dtype, "index_add_cuda_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t size = static_cast<int64_t>(sizeof(T));
    const int64_t self_step = (self.sizes.empty() ? 0 : self.strides[d]) * size;
    const int64_t source_step = (source.sizes.empty() ? 0 : source.strides[d]) * size;
    const auto alpha = scalar_as<compute_t<T>>(args.alpha);
    auto* self_ptr = static_cast<char*>(self.data);
    auto* source_ptr = static_cast<const char*>(source.data);
    auto run = [&](auto index_tag) {
      using I = typename decltype(index_tag)::type;
      const I* index_ptr = static_cast<const I*>(index.data);
      if (dim_size * count <= kScanBudget) {
        index_add_scan_kernel<T, I><<<grid_blocks(dim_size * shape.numel), kThreads, 0, stream>>>(
            shape.numel, self_ptr, source_ptr, index_ptr, index_stride, count, dim_size, self_step, source_step, alpha,
            calc);
      } else {
        index_add_kernel<T, I><<<grid_blocks(shape.numel), kThreads, 0, stream>>>(
            shape.numel, self_ptr, source_ptr, index_ptr, index_stride, count, dim_size, self_step, source_step, alpha,
            calc);
      }
    };
    if (index.dtype == kInt64) run(TypeTag<int64_t>{});
    else run(TypeTag<int32_t>{});
  });
  check_launch(stream);
}

}  // namespace ember::detail::driver
