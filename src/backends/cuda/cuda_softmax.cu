// Softmax, LogSoftmax, LogSumExp, ArgMax and ArgMin on the driver backend.
//
// Softmax: one warp per row (a position of the kept dims), lanes striding along the
// softmax dim: max and sum by warp shuffles, then one pass writes (LogSumExp: lane 0
// writes the line's one result). Rows are found with an
// OffsetCalc over the kept dims, so any strides work; dense rows load coalesced.
// ArgMax/ArgMin along a dim: one thread per output, scanning its row (neighbouring
// outputs are neighbours in memory). Over the whole tensor: one block, each thread
// scanning a strided share of the row-major positions, then a shared-memory combine
// that keeps the smaller index on ties (and NaN as the extreme), as the cpu.
#include "backends/cuda/cuda_loops.cuh"

namespace ember::detail::driver {
namespace {

template <typename A>
__device__ A warp_max(A v) {
  for (int delta = 16; delta > 0; delta /= 2) {
    A other = __shfl_xor_sync(0xffffffffu, v, delta);
    v = (v != v || v > other) ? v : other;
  }
  return v;
}

template <typename A>
__device__ A warp_sum(A v) {
  for (int delta = 16; delta > 0; delta /= 2) v += __shfl_xor_sync(0xffffffffu, v, delta);
  return v;
}

/// The maximum of a line of n values of T, `step` bytes apart, over a warp's lanes (NaN
/// wins), in every lane.
template <typename T, typename A = compute_t<T>>
__device__ A line_max(const char* x, int64_t n, int64_t step, int lane) {
  A m = -INFINITY;
  for (int64_t k = lane; k < n; k += 32) {
    const A v = convert<A>(*reinterpret_cast<const T*>(x + k * step));
    m = (m != m || m > v) ? m : v;
  }
  return warp_max(m);
}

/// The sum of exp(v - m) over the same line, in every lane.
template <typename T, typename A = compute_t<T>>
__device__ A line_exp_sum(const char* x, int64_t n, int64_t step, int lane, A m) {
  A sum = 0;
  for (int64_t k = lane; k < n; k += 32) sum += exp(convert<A>(*reinterpret_cast<const T*>(x + k * step)) - m);
  return warp_sum(sum);
}

template <typename T, bool kLog>
__global__ void softmax_kernel(int64_t rows, int64_t n, char* out, const char* in, int64_t out_dim, int64_t in_dim,
                               OffsetCalc<2> calc) {
  using A = compute_t<T>;
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    int64_t o[2];
    calc.get(row, o);
    const char* x = in + o[1];
    char* y = out + o[0];
    const A m = line_max<T>(x, n, in_dim, lane);
    const A sum = line_exp_sum<T>(x, n, in_dim, lane, m);
    const A factor = kLog ? log(sum) : A(1) / sum;
    for (int64_t k = lane; k < n; k += 32) {
      const A v = convert<A>(*reinterpret_cast<const T*>(x + k * in_dim)) - m;
      *reinterpret_cast<T*>(y + k * out_dim) = convert<T>(kLog ? v - factor : exp(v) * factor);
    }
  }
}

// LogSumExp: softmax's first two passes per row (Note [Fused logsumexp] in
// cpu_softmax.cpp), lane 0 writing log(sum) + max; an infinite maximum counts as 0.
template <typename T>
__global__ void logsumexp_kernel(int64_t rows, int64_t n, char* out, const char* in, int64_t in_dim,
                                 OffsetCalc<2> calc) {
  using A = compute_t<T>;
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    int64_t o[2];
    calc.get(row, o);
    const char* x = in + o[1];
    A m = line_max<T>(x, n, in_dim, lane);
    if (m == A(INFINITY) || m == A(-INFINITY)) m = A(0);
    const A sum = line_exp_sum<T>(x, n, in_dim, lane, m);
    if (lane == 0) *reinterpret_cast<T*>(out + o[0]) = convert<T>(log(sum) + m);
  }
}

template <bool kMax, typename A>
__device__ bool better(A v, int64_t i, A best, int64_t best_index) {
  if constexpr (std::is_floating_point_v<A>) {
    if (best != best) return v != v && i < best_index;
    if (v != v) return true;
  }
  if (v == best) return i < best_index;
  return kMax ? v > best : v < best;
}

template <typename T, bool kMax>
__global__ void arg_dim_kernel(int64_t outputs, int64_t n, char* out, const char* in, int64_t in_dim,
                               OffsetCalc<2> calc) {
  using A = compute_t<T>;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < outputs; i += stride) {
    int64_t o[2];
    calc.get(i, o);
    const char* x = in + o[1];
    A best = convert<A>(*reinterpret_cast<const T*>(x));
    int64_t index = 0;
    for (int64_t k = 1; k < n; ++k) {
      const A v = convert<A>(*reinterpret_cast<const T*>(x + k * in_dim));
      if (better<kMax>(v, k, best, index)) best = v, index = k;
    }
    *reinterpret_cast<int64_t*>(out + o[0]) = index;
  }
}

template <typename T, bool kMax>
__global__ void arg_all_kernel(int64_t n, int64_t* out, const char* in, OffsetCalc<1> calc) {
  using A = compute_t<T>;
  __shared__ A values[kThreads];
  __shared__ int64_t indices[kThreads];
  A best = A(0);
  int64_t index = -1;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    int64_t o[1];
    calc.get(i, o);
    const A v = convert<A>(*reinterpret_cast<const T*>(in + o[0]));
    if (index < 0 || better<kMax>(v, i, best, index)) best = v, index = i;
  }
  values[threadIdx.x] = best;
  indices[threadIdx.x] = index;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) {
      const int other = threadIdx.x + width;
      if (indices[other] >= 0 &&
          (indices[threadIdx.x] < 0 ||
           better<kMax>(values[other], indices[other], values[threadIdx.x], indices[threadIdx.x]))) {
        values[threadIdx.x] = values[other];
        indices[threadIdx.x] = indices[other];
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = indices[0];
}

// The kept positions of `in` along `dim` (that dim collapsed) beside `out`'s.
LoopShape kept_shape(const TensorArg& out, const TensorArg& in, int64_t dim) {
  TensorArg in_kept = in, out_kept = out;
  in_kept.sizes[dim] = 1;
  out_kept.sizes[dim] = 1;
  return make_loop_shape({&out_kept, &in_kept}, /*reorder=*/true);
}

}  // namespace

void launch_softmax(const KernelCall& call, cudaStream_t stream) {
  const TensorArg &out = call.outputs.at(0), &in = call.inputs.at(0);
  if (in.numel() == 0) return;
  const bool log = call.op == OpKind::LogSoftmax;
  TensorArg in1 = in, out1 = out;
  if (in1.sizes.empty()) in1.sizes = out1.sizes = {1}, in1.strides = out1.strides = {1};
  const int64_t dim = call.arg<kargs::Dim>().dim;
  const int64_t n = in1.sizes[dim];
  dispatch_if<FloatType>(in.dtype, log ? "log_softmax_lastdim_kernel_impl" : "softmax_lastdim_kernel_impl",
                         [&](auto tag) {
                           using T = typename decltype(tag)::type;
                           const int64_t bytes = sizeof(T);
                           LoopShape rows = kept_shape(out1, in1, dim);
                           OffsetCalc<2> calc = make_offset_calc<2>(rows);
                           auto* o = static_cast<char*>(out.data);
                           auto* x = static_cast<const char*>(in.data);
                           const int blocks = grid_blocks(rows.numel * 32);
                           if (log) {
                             softmax_kernel<T, true><<<blocks, kThreads, 0, stream>>>(
                                 rows.numel, n, o, x, out1.strides[dim] * bytes, in1.strides[dim] * bytes, calc);
                           } else {
                             softmax_kernel<T, false><<<blocks, kThreads, 0, stream>>>(
                                 rows.numel, n, o, x, out1.strides[dim] * bytes, in1.strides[dim] * bytes, calc);
                           }
                         });
  check_launch(stream);
}

void launch_logsumexp(const KernelCall& call, cudaStream_t stream) {
  const TensorArg &out = call.outputs.at(0), &in = call.inputs.at(0);
  TensorArg in1 = in, out1 = out;
  if (in1.sizes.empty()) in1.sizes = out1.sizes = {1}, in1.strides = out1.strides = {1};
  const int64_t dim = call.arg<kargs::Dim>().dim;
  const int64_t n = in1.sizes[dim];
  dispatch_if<FloatType>(in.dtype, "logsumexp", [&](auto tag) {
    using T = typename decltype(tag)::type;
    LoopShape rows = kept_shape(out1, in1, dim);
    if (rows.numel == 0) return;
    OffsetCalc<2> calc = make_offset_calc<2>(rows);
    logsumexp_kernel<T><<<grid_blocks(rows.numel * 32), kThreads, 0, stream>>>(
        rows.numel, n, static_cast<char*>(out.data), static_cast<const char*>(in.data),
        in1.strides[dim] * static_cast<int64_t>(sizeof(T)), calc);
  });
  check_launch(stream);
}

void launch_arg_reduce(const KernelCall& call, cudaStream_t stream) {
  const TensorArg &out = call.outputs.at(0), &in = call.inputs.at(0);
  const bool is_max = call.op == OpKind::ArgMax;
  const int64_t dim = in.sizes.empty() ? -1 : call.arg<kargs::Dim>().dim;
  dispatch_if<RealType_>(in.dtype, is_max ? "argmax_cuda" : "argmin_cuda", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto* o = static_cast<char*>(out.data);
    auto* x = static_cast<const char*>(in.data);
    if (dim == -1) {
      LoopShape all = make_loop_shape({&in}, /*reorder=*/false);
      OffsetCalc<1> calc = make_offset_calc<1>(all);
      if (is_max)
        arg_all_kernel<T, true><<<1, kThreads, 0, stream>>>(all.numel, reinterpret_cast<int64_t*>(o), x, calc);
      else arg_all_kernel<T, false><<<1, kThreads, 0, stream>>>(all.numel, reinterpret_cast<int64_t*>(o), x, calc);
      return;
    }
    LoopShape rows = kept_shape(out, in, dim);
    OffsetCalc<2> calc = make_offset_calc<2>(rows);
    const int64_t in_dim = in.strides[dim] * static_cast<int64_t>(sizeof(T));
    if (is_max) {
      arg_dim_kernel<T, true>
          <<<grid_blocks(rows.numel), kThreads, 0, stream>>>(rows.numel, in.sizes[dim], o, x, in_dim, calc);
    } else {
      arg_dim_kernel<T, false>
          <<<grid_blocks(rows.numel), kThreads, 0, stream>>>(rows.numel, in.sizes[dim], o, x, in_dim, calc);
    }
  });
  check_launch(stream);
}

}  // namespace ember::detail::driver
