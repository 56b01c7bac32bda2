// Reductions on the driver backend: Sum, Mean, Max, Min, All, whole-tensor or along
// one dim or several.
//
// Whole tensor: two passes. Pass 1 has each block fold a grid-stride slice (any
// strides, via OffsetCalc) and reduce it with warp shuffles plus one shared-memory step
// into a per-block partial; pass 2 reduces the partials in one block and stores the
// result. One block's worth of input skips pass 2. Along a dim: when the reduced dim is
// dense (stride 1) or there are fewer outputs than a warp, a block reduces each output
// (coalesced loads, block reduction); otherwise each thread folds one output serially, which
// is coalesced across threads because neighbouring outputs are neighbours in memory.
// Several reduced dims (kargs::Dim::more) are one run of positions walked through an
// OffsetCalc over those dims; a single dim is a plain stride. Few outputs over long runs split
// each run over gridDim.y into partials, combined per output in split order by a second kernel.
//
// The fold itself is the shared reducers of kernels/reducers.h (the CPU's bodies): each
// thread steps its running Acc over elements (acc_step), threads and blocks merge with
// combine, and finish gives the value (the mean's division). So sums of float
// accumulate in double and integers in int64 as on the CPU, and Max/Min propagate NaN.
// The output is stored through store_as, so its dtype may differ from the input's.
#include <algorithm>
#include <optional>

#include "backends/cuda/cuda_loops.cuh"
#include "backends/cuda/cuda_workspace.h"
#include "kernels/loop_shape.h"
#include "kernels/reducers.h"

namespace ember::detail {

/// Complex sums on the device: cuda::std::complex lanes and accumulator (std::complex
/// is host-only); otherwise the CPU's SumReducer.
template <typename R>
struct SumReducer<::cuda::std::complex<R>> {
  using T = ::cuda::std::complex<R>;
  using Lane = T;
  using Acc = ::cuda::std::complex<double>;
  static EMBER_HOST_DEVICE Lane lane_identity() { return Lane(0); }
  static EMBER_HOST_DEVICE Lane step(Lane l, T x) { return l + x; }
  static EMBER_HOST_DEVICE Lane lane_combine(Lane a, Lane b) { return a + b; }
  static EMBER_HOST_DEVICE Acc acc_identity() { return Acc(0); }
  static EMBER_HOST_DEVICE Acc merge(Acc a, Lane l) { return a + convert<Acc>(l); }
  static EMBER_HOST_DEVICE Acc acc_step(Acc a, T x) { return a + convert<Acc>(x); }
  static EMBER_HOST_DEVICE Acc combine(Acc a, Acc b) { return a + b; }
  static EMBER_HOST_DEVICE Acc finish(Acc a, int64_t) { return a; }
};

}  // namespace ember::detail

namespace ember::detail::driver {
namespace {

/// The interface the kernels below use, over a shared reducer R of storage type T.
template <typename R>
struct Fold {
  using Acc = typename R::Acc;
  __device__ Acc identity() const { return R::acc_identity(); }
  template <typename T>
  __device__ Acc step(Acc a, T x) const {
    return R::acc_step(a, x);
  }
  __device__ Acc combine(Acc a, Acc b) const { return R::combine(a, b); }
  __device__ Acc project(Acc a, int64_t count) const { return R::finish(a, count); }
};

template <typename T>
__device__ T shfl_down(T v, int delta) {
  if constexpr (is_complex_v<T>) {
    return T(shfl_down(v.real(), delta), shfl_down(v.imag(), delta));
  } else if constexpr (sizeof(T) < 4) {
    return static_cast<T>(__shfl_down_sync(0xffffffffu, static_cast<int>(v), delta));
  } else {
    return __shfl_down_sync(0xffffffffu, v, delta);
  }
}

template <typename Acc, typename Op>
__device__ Acc warp_reduce(Acc v, const Op& op) {
#pragma unroll
  for (int delta = 16; delta > 0; delta /= 2) v = op.combine(v, shfl_down(v, delta));
  return v;
}

/// The block's reduction of every thread's `v`, valid in thread 0. blockDim.x is a
/// multiple of 32; all threads must call it.
template <typename Acc, typename Op>
__device__ Acc block_reduce(Acc v, const Op& op) {
  __shared__ alignas(16) unsigned char raw[32 * sizeof(Acc)];
  Acc* per_warp = reinterpret_cast<Acc*>(raw);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_reduce(v, op);
  if (lane == 0) per_warp[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? per_warp[lane] : op.identity();
    v = warp_reduce(v, op);
  }
  __syncthreads();  // per_warp is reused by the caller's next iteration
  return v;
}

template <typename In, typename Acc, typename Op>
__global__ void reduce_all_kernel(int64_t n, const char* in, OffsetCalc<1> calc, Acc* partial, char* out,
                                  DType out_dtype, Op op) {
  Acc acc = op.identity();
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t offset[1];
    calc.get(i, offset);
    acc = op.step(acc, *reinterpret_cast<const In*>(in + offset[0]));
  }
  acc = block_reduce(acc, op);
  if (threadIdx.x != 0) return;
  if (out != nullptr) store_as(out, out_dtype, op.project(acc, n));  // single block: done
  else partial[blockIdx.x] = acc;
}

template <typename Acc, typename Op>
__global__ void reduce_partials_kernel(int blocks, const Acc* partial, char* out, DType out_dtype, int64_t n, Op op) {
  Acc acc = op.identity();
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) acc = op.combine(acc, partial[i]);
  acc = block_reduce(acc, op);
  if (threadIdx.x == 0) store_as(out, out_dtype, op.project(acc, n));
}

/// The reduced positions of one output: `len` elements `step` bytes apart (one reduced dim).
struct OneDim {
  int64_t step;
  __device__ int64_t offset(int64_t j) const { return j * step; }
};

/// The reduced positions over several dims (their sizes and byte strides, coalesced).
struct ManyDims {
  OffsetCalc<1> calc;
  __device__ int64_t offset(int64_t j) const {
    int64_t o[1];
    calc.get(j, o);
    return o[0];
  }
};

/// Positions [begin, end) of the reduced run that split blockIdx.y folds (all of them unsplit).
struct Split {
  int64_t chunk;  // positions per split
  __device__ int64_t begin() const { return static_cast<int64_t>(blockIdx.y) * chunk; }
  __device__ int64_t end(int64_t len) const { return begin() + chunk < len ? begin() + chunk : len; }
};

/// Ends an output's fold: the value itself, or (split) its partial for reduce_dim_partials_kernel.
template <typename Acc, typename Op>
__device__ void finish_output(Acc acc, int64_t o, int64_t outputs, int64_t len, char* out, DType out_dtype,
                              Acc* partial, const Op& op) {
  if (partial != nullptr) partial[static_cast<int64_t>(blockIdx.y) * outputs + o] = acc;
  else store_as(out, out_dtype, op.project(acc, len));
}

template <typename In, typename Acc, typename Walk, typename Op>
__global__ void reduce_dim_block_kernel(int64_t outputs, int64_t len, Walk walk, Split split, const char* in, char* out,
                                        DType out_dtype, OffsetCalc<2> calc, Acc* partial, Op op) {
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    int64_t offsets[2];
    calc.get(o, offsets);
    Acc acc = op.identity();
    for (int64_t j = split.begin() + threadIdx.x; j < split.end(len); j += blockDim.x) {
      acc = op.step(acc, *reinterpret_cast<const In*>(in + offsets[0] + walk.offset(j)));
    }
    acc = block_reduce(acc, op);
    if (threadIdx.x == 0) finish_output(acc, o, outputs, len, out + offsets[1], out_dtype, partial, op);
  }
}

template <typename In, typename Acc, typename Walk, typename Op>
__global__ void reduce_dim_thread_kernel(int64_t outputs, int64_t len, Walk walk, Split split, const char* in,
                                         char* out, DType out_dtype, OffsetCalc<2> calc, Acc* partial, Op op) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs; o += stride) {
    int64_t offsets[2];
    calc.get(o, offsets);
    Acc acc = op.identity();
    for (int64_t j = split.begin(); j < split.end(len); ++j) {
      acc = op.step(acc, *reinterpret_cast<const In*>(in + offsets[0] + walk.offset(j)));
    }
    finish_output(acc, o, outputs, len, out + offsets[1], out_dtype, partial, op);
  }
}

/// Each output's partials, combined in split order (so the result does not depend on timing).
template <typename Acc, typename Op>
__global__ void reduce_dim_partials_kernel(int64_t outputs, int64_t splits, int64_t len, const Acc* partial, char* out,
                                           DType out_dtype, OffsetCalc<2> calc, Op op) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs; o += stride) {
    Acc acc = op.identity();
    for (int64_t y = 0; y < splits; ++y) acc = op.combine(acc, partial[y * outputs + o]);
    int64_t offsets[2];
    calc.get(o, offsets);
    store_as(out + offsets[1], out_dtype, op.project(acc, len));
  }
}

template <typename In, typename Acc, typename Op>
void reduce_all(const KernelCall& call, cudaStream_t stream, const Op& op) {
  const TensorArg& in = call.inputs.at(0);
  const TensorArg& out = call.outputs.at(0);
  LoopShape shape = make_loop_shape({&in}, /*reorder=*/true);
  OffsetCalc<1> calc = make_offset_calc<1>(shape);
  int blocks = grid_blocks(shape.numel);
  auto* in_ptr = static_cast<const char*>(in.data);
  auto* out_ptr = static_cast<char*>(out.data);
  if (blocks == 1) {
    reduce_all_kernel<In, Acc><<<1, kThreads, 0, stream>>>(shape.numel, in_ptr, calc, nullptr, out_ptr, out.dtype, op);
    check_launch(stream);
    return;
  }
  // The partials are a Workspace (Note [Driver temporaries]), returned after pass 2 is enqueued.
  Workspace partials(call.device, sizeof(Acc) * blocks);
  auto* partial = static_cast<Acc*>(partials.get());
  reduce_all_kernel<In, Acc>
      <<<blocks, kThreads, 0, stream>>>(shape.numel, in_ptr, calc, partial, nullptr, out.dtype, op);
  check_launch(stream);
  reduce_partials_kernel<Acc><<<1, kThreads, 0, stream>>>(blocks, partial, out_ptr, out.dtype, shape.numel, op);
  check_launch(stream);
}

template <typename In, typename Acc, typename Op>
void reduce_dim(const KernelCall& call, cudaStream_t stream, const Op& op) {
  const TensorArg& in = call.inputs.at(0);
  const TensorArg& out = call.outputs.at(0);
  const int64_t along = call.arg<kargs::Dim>().dim;
  const uint64_t more = call.arg<kargs::Dim>().more;
  const size_t nd = in.sizes.size();
  EMBER_CHECK(static_cast<size_t>(along) < nd, IndexError, "Dimension out of range (expected to be in range of [",
              -static_cast<int64_t>(nd), ", ", static_cast<int64_t>(nd) - 1, "], but got ", along, ")");
  EMBER_CHECK(nd >= 64 || (more >> nd) == 0, IndexError, "reduction over dims ", more, " of a ", nd, "-dim tensor");
  // The reduced dims, and the input and output without them (out is in keepdim form, size 1
  // at each reduced dim, or squeezed).
  TensorArg reduced = in;
  reduced.sizes.clear();
  reduced.strides.clear();
  TensorArg in_rest = in;
  TensorArg out_rest = out;
  const bool keepdim_out = out.sizes.size() == nd;
  auto is_reduced = [&](size_t d) { return static_cast<int64_t>(d) == along || (d < 64 && ((more >> d) & 1) != 0); };
  int64_t len = 1;
  for (size_t d = 0; d < nd; ++d) {
    if (!is_reduced(d)) continue;
    reduced.sizes.push_back(in.sizes[d]);
    reduced.strides.push_back(in.strides[d]);
    len *= in.sizes[d];
  }
  for (size_t d = nd; d-- > 0;) {  // last first, so the earlier dims keep their numbers
    if (!is_reduced(d)) continue;
    in_rest = without_dim(in_rest, d);
    if (keepdim_out) out_rest = without_dim(out_rest, d);
  }
  out_rest.sizes = in_rest.sizes;
  LoopShape shape = make_loop_shape({&in_rest, &out_rest}, /*reorder=*/true);
  if (shape.numel == 0) return;
  OffsetCalc<2> calc = make_offset_calc<2>(shape);
  auto* in_ptr = static_cast<const char*>(in.data);
  auto* out_ptr = static_cast<char*>(out.data);
  // Few outputs over long runs (a bias gradient: a few hundred outputs of many rows each) would
  // leave most of the device idle: the runs are then split over gridDim.y, each split folding
  // at least min_chunk positions into a partial, and a second kernel combines each output's
  // partials in split order.
  const int64_t full = grid_blocks(int64_t{1} << 40);  // the device's full-occupancy grid
  auto run = [&](auto walk, bool dense) {
    using Walk = decltype(walk);
    // A block per output where its run is dense or there are too few outputs to fill a warp;
    // otherwise a thread per output, whose neighbours read the neighbouring elements.
    const bool per_block = dense || shape.numel < 32;
    const int64_t blocks = per_block ? grid_blocks(shape.numel * kThreads) : grid_blocks(shape.numel);
    const int64_t min_chunk = per_block ? 16 * kThreads : 64;
    int64_t splits = 1;
    if (blocks * 8 < full && len >= 2 * min_chunk) {
      splits = std::min<int64_t>({(full / 8 + blocks - 1) / blocks, len / min_chunk, 65535});
    }
    const Split split{(len + splits - 1) / splits};
    splits = len == 0 ? 1 : (len + split.chunk - 1) / split.chunk;
    std::optional<Workspace> partials;
    Acc* partial = nullptr;
    if (splits > 1) {
      partials.emplace(call.device, sizeof(Acc) * static_cast<size_t>(shape.numel * splits));
      partial = static_cast<Acc*>(partials->get());
    }
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(splits));
    if (per_block) {
      reduce_dim_block_kernel<In, Acc, Walk>
          <<<grid, kThreads, 0, stream>>>(shape.numel, len, walk, split, in_ptr, out_ptr, out.dtype, calc, partial, op);
    } else {
      reduce_dim_thread_kernel<In, Acc, Walk>
          <<<grid, kThreads, 0, stream>>>(shape.numel, len, walk, split, in_ptr, out_ptr, out.dtype, calc, partial, op);
    }
    check_launch(stream);
    if (splits == 1) return;
    reduce_dim_partials_kernel<Acc><<<grid_blocks(shape.numel), kThreads, 0, stream>>>(
        shape.numel, splits, len, partial, out_ptr, out.dtype, calc, op);
    check_launch(stream);
  };
  if (reduced.sizes.size() == 1)
    return run(OneDim{in.strides[along] * static_cast<int64_t>(sizeof(In))}, in.strides[along] == 1);
  // Several dims: coalesced and ordered by stride (the result does not depend on the order of
  // the reduced positions beyond rounding, as on the cpu).
  const LoopShape walk_shape = make_loop_shape({&reduced}, /*reorder=*/true);
  const bool dense = walk_shape.strides[walk_shape.ndim() - 1][0] == static_cast<int64_t>(sizeof(In));
  if (walk_shape.ndim() == 1) return run(OneDim{walk_shape.strides[0][0]}, dense);
  run(ManyDims{make_offset_calc<1>(walk_shape)}, dense);
}

template <typename In, typename Acc, typename Op>
void reduce(const KernelCall& call, cudaStream_t stream, const Op& op) {
  bool whole = call.arg<kargs::Dim>().dim < 0 || call.inputs.at(0).sizes.empty();
  if (whole) reduce_all<In, Acc>(call, stream, op);
  else reduce_dim<In, Acc>(call, stream, op);
}

}  // namespace

void launch_reduce(const KernelCall& call, cudaStream_t stream) {
  DType dtype = call.inputs.at(0).dtype;
  auto run = [&]<typename R, typename T>(TypeTag<R>, TypeTag<T>) {
    reduce<T, typename R::Acc>(call, stream, Fold<R>{});
  };
  switch (call.op) {
    // EMBER_REDUCE_OPS (kernels/op_list.h): each reducer for the dtypes of its row's class.
#define EMBER_CUDA_REDUCE(Kind, name, Reducer, Types) \
  case OpKind::Kind:                                  \
    return dispatch_if<Types>(dtype, #name, [&]<typename T>(TypeTag<T>) { run(TypeTag<Reducer<T>>{}, TypeTag<T>{}); });
    EMBER_REDUCE_OPS(EMBER_CUDA_REDUCE)
#undef EMBER_CUDA_REDUCE
    default: EMBER_ASSERT(false);
  }
}

}  // namespace ember::detail::driver
