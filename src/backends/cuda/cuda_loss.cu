// NllLoss and BatchNormStats on the driver backend (contracts in kernels/loss_kernels.h).
//
// NllLoss: one thread per (n, s); reduced, one block folding in double. A target out of range fails a device assert, as
// PyTorch's kernel does: CUDA marks the context and the next synchronizing call raises
// "CUDA error: device-side assert triggered" (at the launch under CUDA_LAUNCH_BLOCKING=1).
// The assert stays in release builds on purpose (see cuda_index_select.cu).
// BatchNormStats: one block per channel; each thread sums a strided share of the
// channel's elements in double, the block combines them in shared memory, and a second
// pass does the same for the squared deviations.
#ifdef NDEBUG
#undef NDEBUG
#endif
#include <cassert>

#include "backends/cuda/cuda_loops.cuh"
#include "kernels/loss_kernels.h"

namespace ember::detail::driver {
namespace {

struct NllDims {
  int64_t batch, classes, spatial;
  int64_t in_n, in_c, in_s, target_n, target_s, loss_n, loss_s, counted_n, counted_s;  // element strides
};

template <typename T>
__global__ void nll_kernel(T* loss, T* counted, const T* in, const int64_t* target, NllDims d, int64_t ignore) {
  const int64_t total = d.batch * d.spatial;
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t n = i / d.spatial, s = i % d.spatial;
    const int64_t c = target[n * d.target_n + s * d.target_s];
    const bool use = c != ignore;
    assert((!use || (c >= 0 && c < d.classes)) && "Target is out of bounds.");
    using C = compute_t<T>;
    const C v = use ? convert<C>(in[n * d.in_n + c * d.in_c + s * d.in_s]) : C(0);
    loss[n * d.loss_n + s * d.loss_s] = convert<T>(-v);
    counted[n * d.counted_n + s * d.counted_s] = convert<T>(use ? 1.0f : 0.0f);
  }
}

__device__ double block_sum(double v);

// Reduced (sum or mean): one block; each thread folds a strided share in double.
template <typename T>
__global__ void nll_reduced_kernel(T* loss, T* counted, const T* in, const int64_t* target, NllDims d, int64_t ignore,
                                   bool mean) {
  const int64_t total = d.batch * d.spatial;
  double sum = 0, count = 0;
  for (int64_t i = threadIdx.x; i < total; i += blockDim.x) {
    const int64_t n = i / d.spatial, s = i % d.spatial;
    const int64_t c = target[n * d.target_n + s * d.target_s];
    if (c == ignore) continue;
    assert(c >= 0 && c < d.classes && "Target is out of bounds.");
    sum -= convert<double>(in[n * d.in_n + c * d.in_c + s * d.in_s]);
    count += 1;
  }
  sum = block_sum(sum);
  count = block_sum(count);
  if (threadIdx.x == 0) {
    *loss = convert<T>(mean ? sum / count : sum);
    *counted = convert<T>(count);
  }
}

__device__ double block_sum(double v) {
  __shared__ double partial[kThreads];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  double total = partial[0];
  __syncthreads();
  return total;
}

template <typename T>
__global__ void batch_norm_stats_kernel(T* mean_out, T* var_out, int64_t mean_stride, int64_t var_stride, const T* in,
                                        int64_t batch, int64_t spatial, int64_t sn, int64_t sc, int64_t ss) {
  const int64_t c = blockIdx.x;
  const int64_t count = batch * spatial;
  const T* base = in + c * sc;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x)
    sum += convert<double>(base[(i / spatial) * sn + (i % spatial) * ss]);
  const double mean = count > 0 ? block_sum(sum) / static_cast<double>(count) : 0.0;
  double squares = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const double d = convert<double>(base[(i / spatial) * sn + (i % spatial) * ss]) - mean;
    squares += d * d;
  }
  const double var = block_sum(squares);
  if (threadIdx.x == 0) {
    mean_out[c * mean_stride] = convert<T>(mean);
    var_out[c * var_stride] = convert<T>(count > 0 ? var / static_cast<double>(count) : 0.0);
  }
}

}  // namespace

void launch_nll_loss(const KernelCall& call, cudaStream_t stream) {
  const TensorArg &in = call.inputs.at(0), &target = call.inputs.at(1);
  const TensorArg &loss = call.outputs.at(0), &counted = call.outputs.at(1);
  EMBER_CHECK(target.dtype == kInt64, TypeError, "expected scalar type Long but found ",
              scalar_type_name(target.dtype));
  const auto& args = call.arg<kargs::NllLoss>();
  const bool reduced = args.reduction != 0;
  const NllDims d{in.sizes[0],
                  in.sizes[1],
                  in.sizes[2],
                  in.strides[0],
                  in.strides[1],
                  in.strides[2],
                  target.strides[0],
                  target.strides[1],
                  reduced ? 0 : loss.strides[0],
                  reduced ? 0 : loss.strides[1],
                  reduced ? 0 : counted.strides[0],
                  reduced ? 0 : counted.strides[1]};
  const int64_t total = d.batch * d.spatial;
  if (total == 0) return;
  dispatch_if<FloatType>(in.dtype, "nll_loss_forward_out_frame", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (reduced) {
      nll_reduced_kernel<T><<<1, kThreads, 0, stream>>>(
          static_cast<T*>(loss.data), static_cast<T*>(counted.data), static_cast<const T*>(in.data),
          static_cast<const int64_t*>(target.data), d, args.ignore_index, args.reduction == 2);
      return;
    }
    nll_kernel<T><<<grid_blocks(total), kThreads, 0, stream>>>(
        static_cast<T*>(loss.data), static_cast<T*>(counted.data), static_cast<const T*>(in.data),
        static_cast<const int64_t*>(target.data), d, args.ignore_index);
  });
  check_launch(stream);
}

void launch_batch_norm_stats(const KernelCall& call, cudaStream_t stream) {
  const TensorArg& in = call.inputs.at(0);
  const TensorArg &mean = call.outputs.at(0), &var = call.outputs.at(1);
  const int64_t channels = in.sizes[1];
  if (channels == 0) return;
  dispatch_if<FloatType>(in.dtype, "batch_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    batch_norm_stats_kernel<T><<<static_cast<unsigned>(channels), kThreads, 0, stream>>>(
        static_cast<T*>(mean.data), static_cast<T*>(var.data), mean.strides.at(0), var.strides.at(0),
        static_cast<const T*>(in.data), in.sizes[0], in.sizes[2], in.strides[0], in.strides[1], in.strides[2]);
  });
  check_launch(stream);
}

}  // namespace ember::detail::driver
