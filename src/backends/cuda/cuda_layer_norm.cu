// LayerNorm and LayerNormBackward on the driver backend (contracts in
// kernels/transformer_kernels.h).
//
// Forward: one block per row; the block sums the row, then its squared deviations, in the
// accumulator type (float, or double for float64), and writes y, mean and rstd in one
// kernel. Backward: one block per row for the input's gradient (two block sums, then the
// write); one thread per column for the weight's and bias's gradients, summing rows in
// order, so they are deterministic (no atomics).
#include <type_traits>

#include "backends/cuda/cuda_loops.cuh"
#include "kernels/transformer_kernels.h"

namespace ember::detail::driver {
namespace {

template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename A>
__device__ A block_total(A v) {
  __shared__ A partial[kThreads];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  A total = partial[0];
  __syncthreads();
  return total;
}

template <typename T>
__global__ void layer_norm_kernel(T* y, T* mean_out, T* rstd_out, const T* x, const T* w, const T* b, int64_t cols,
                                  acc_t<T> eps) {
  using A = acc_t<T>;
  const int64_t r = blockIdx.x;
  const T* row = x + r * cols;
  A sum = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += convert<A>(row[c]);
  const A mean = block_total(sum) / static_cast<A>(cols);
  A squares = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const A dev = convert<A>(row[c]) - mean;
    squares += dev * dev;
  }
  const A rstd = A(1) / sqrt(block_total(squares) / static_cast<A>(cols) + eps);
  T* out = y + r * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    A v = (convert<A>(row[c]) - mean) * rstd;
    if (w != nullptr) v = v * convert<A>(w[c]);
    if (b != nullptr) v = v + convert<A>(b[c]);
    out[c] = convert<T>(v);
  }
  if (threadIdx.x == 0) {
    mean_out[r] = convert<T>(mean);
    rstd_out[r] = convert<T>(rstd);
  }
}

template <typename T>
__global__ void layer_norm_grad_input_kernel(T* gx, const T* g, const T* x, const T* mean, const T* rstd, const T* w,
                                             int64_t cols) {
  using A = acc_t<T>;
  const int64_t r = blockIdx.x;
  const T* gr = g + r * cols;
  const T* xr = x + r * cols;
  const A m = convert<A>(mean[r]), s = convert<A>(rstd[r]);
  A sum_gh = 0, sum_gh_xh = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const A gh = convert<A>(gr[c]) * (w != nullptr ? convert<A>(w[c]) : A(1));
    sum_gh += gh;
    sum_gh_xh += gh * (convert<A>(xr[c]) - m) * s;
  }
  const A mean_gh = block_total(sum_gh) / static_cast<A>(cols);
  const A mean_gh_xh = block_total(sum_gh_xh) / static_cast<A>(cols);
  T* out = gx + r * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const A gh = convert<A>(gr[c]) * (w != nullptr ? convert<A>(w[c]) : A(1));
    const A xh = (convert<A>(xr[c]) - m) * s;
    out[c] = convert<T>(s * (gh - mean_gh - xh * mean_gh_xh));
  }
}

template <typename T>
__global__ void layer_norm_grad_affine_kernel(T* gw, T* gb, const T* g, const T* x, const T* mean, const T* rstd,
                                              int64_t rows, int64_t cols) {
  using A = acc_t<T>;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  A sum_w = 0, sum_b = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const A gv = convert<A>(g[r * cols + c]);
    sum_w += gv * (convert<A>(x[r * cols + c]) - convert<A>(mean[r])) * convert<A>(rstd[r]);
    sum_b += gv;
  }
  if (gw != nullptr) gw[c] = convert<T>(sum_w);
  if (gb != nullptr) gb[c] = convert<T>(sum_b);
}

}  // namespace

void launch_layer_norm(const KernelCall& call, cudaStream_t stream) {
  const TensorArg& in = call.inputs.at(0);
  const int64_t rows = in.sizes.at(0), cols = in.sizes.at(1);
  if (rows == 0) return;
  dispatch_if<FloatType>(in.dtype, "LayerNormKernelImpl", [&](auto tag) {
    using T = typename decltype(tag)::type;
    size_t next = 1;
    const auto& args = call.arg<kargs::LayerNorm>();
    const T* w = (args.parts & kLayerNormWeight) ? static_cast<const T*>(call.inputs.at(next++).data) : nullptr;
    const T* b = (args.parts & kLayerNormBias) ? static_cast<const T*>(call.inputs.at(next++).data) : nullptr;
    layer_norm_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        static_cast<T*>(call.outputs.at(0).data), static_cast<T*>(call.outputs.at(1).data),
        static_cast<T*>(call.outputs.at(2).data), static_cast<const T*>(in.data), w, b, cols,
        static_cast<acc_t<T>>(args.eps));
  });
  check_launch(stream);
}

void launch_layer_norm_backward(const KernelCall& call, cudaStream_t stream) {
  const TensorArg& x = call.inputs.at(1);
  const int64_t rows = x.sizes.at(0), cols = x.sizes.at(1);
  dispatch_if<FloatType>(x.dtype, "LayerNormBackwardKernelImpl", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* g = static_cast<const T*>(call.inputs.at(0).data);
    const T* xp = static_cast<const T*>(x.data);
    const T* mean = static_cast<const T*>(call.inputs.at(2).data);
    const T* rstd = static_cast<const T*>(call.inputs.at(3).data);
    const int64_t parts = call.arg<kargs::LayerNorm>().parts;
    const T* w = (parts & kLayerNormWeight) ? static_cast<const T*>(call.inputs.at(4).data) : nullptr;
    size_t next = 0;
    T* gx = (parts & kLayerNormGradInput) ? static_cast<T*>(call.outputs.at(next++).data) : nullptr;
    T* gw = (parts & kLayerNormGradWeight) ? static_cast<T*>(call.outputs.at(next++).data) : nullptr;
    T* gb = (parts & kLayerNormGradBias) ? static_cast<T*>(call.outputs.at(next++).data) : nullptr;
    if (gx != nullptr && rows > 0) {
      layer_norm_grad_input_kernel<T>
          <<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(gx, g, xp, mean, rstd, w, cols);
    }
    if ((gw != nullptr || gb != nullptr) && cols > 0) {
      const auto blocks = static_cast<unsigned>((cols + kThreads - 1) / kThreads);
      layer_norm_grad_affine_kernel<T><<<blocks, kThreads, 0, stream>>>(gw, gb, g, xp, mean, rstd, rows, cols);
    }
  });
  check_launch(stream);
}

}  // namespace ember::detail::driver
