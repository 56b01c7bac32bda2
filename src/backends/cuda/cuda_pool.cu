// MaxPool2d and AvgPool2d on the driver backend (contract in kernels/pool_geometry.h): one
// thread per output element, grid-stride, reading the input with its own strides.
// MaxPool2dBackward gathers instead of scattering: one thread per input element sums the
// gradients of the outputs whose index names it, so no atomics and a fixed order.
#include "backends/cuda/cuda_loops.cuh"
#include "kernels/pool_geometry.h"

namespace ember::detail::driver {
namespace {

struct PoolDims {
  int64_t channels, height, width;
  int64_t stride_n, stride_c, stride_y, stride_x;  // elements
};

template <typename T>
__global__ void max_pool_kernel(int64_t total, T* out, int64_t* indices, const T* in, PoolDims d, PoolGeometry g) {
  using A = compute_t<T>;
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t ox = i % g.out_w, oy = (i / g.out_w) % g.out_h, plane = i / (g.out_w * g.out_h);
    const T* p = in + (plane / d.channels) * d.stride_n + (plane % d.channels) * d.stride_c;
    const int64_t y0 = oy * g.stride_h - g.pad_h, x0 = ox * g.stride_w - g.pad_w;
    A best = -INFINITY;
    int64_t best_index = -1;
    for (int64_t a = 0; a < g.kernel_h; ++a) {
      const int64_t y = y0 + a * g.dilation_h;
      if (y < 0 || y >= d.height) continue;
      for (int64_t b = 0; b < g.kernel_w; ++b) {
        const int64_t x = x0 + b * g.dilation_w;
        if (x < 0 || x >= d.width) continue;
        const A v = convert<A>(p[y * d.stride_y + x * d.stride_x]);
        if (best_index < 0 || v > best || (v != v && best == best)) best = v, best_index = y * d.width + x;
      }
    }
    out[i] = convert<T>(best);
    indices[i] = best_index;
  }
}

template <typename T>
__global__ void avg_pool_kernel(int64_t total, T* out, const T* in, PoolDims d, PoolGeometry g) {
  using A = compute_t<T>;
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t ox = i % g.out_w, oy = (i / g.out_w) % g.out_h, plane = i / (g.out_w * g.out_h);
    const T* p = in + (plane / d.channels) * d.stride_n + (plane % d.channels) * d.stride_c;
    const int64_t y0 = oy * g.stride_h - g.pad_h, x0 = ox * g.stride_w - g.pad_w;
    const int64_t y1 = min(y0 + g.kernel_h, d.height + g.pad_h), x1 = min(x0 + g.kernel_w, d.width + g.pad_w);
    const int64_t padded = (y1 - y0) * (x1 - x0);
    const int64_t ya = max(y0, int64_t{0}), yb = min(y1, d.height), xa = max(x0, int64_t{0}), xb = min(x1, d.width);
    A sum = 0;
    for (int64_t y = ya; y < yb; ++y) {
      for (int64_t x = xa; x < xb; ++x) sum += convert<A>(p[y * d.stride_y + x * d.stride_x]);
    }
    const int64_t divisor = g.divisor_override    ? g.divisor_override
                            : g.count_include_pad ? padded
                                                  : (yb - ya) * (xb - xa);
    out[i] = convert<T>(sum / static_cast<A>(divisor));
  }
}

struct PoolGradDims {
  int64_t channels, height, width, out_h, out_w;
  int64_t grad_n, grad_c, grad_y, grad_x;      // strides of the output gradient, elements
  int64_t index_n, index_c, index_y, index_x;  // strides of the indices
};

// The windows that may hold input row (column) `v`: start s * stride - pad + a * dilation
// == v for some a in [0, kernel), i.e. s in [ceil((v + pad - (kernel-1)*dilation) / stride),
// (v + pad) / stride], clipped to [0, out).
__device__ inline void window_range(int64_t v, int64_t pad, int64_t kernel, int64_t dilation, int64_t stride,
                                    int64_t out, int64_t& lo, int64_t& hi) {
  const int64_t first = v + pad - (kernel - 1) * dilation;
  lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  hi = min((v + pad) / stride + 1, out);
}

template <typename T>
__global__ void max_pool_backward_kernel(int64_t total, T* out, const T* grad, const int64_t* indices, PoolGradDims d,
                                         PoolGeometry g) {
  using A = compute_t<T>;
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t x = i % d.width, y = (i / d.width) % d.height, plane = i / (d.width * d.height);
    const int64_t n = plane / d.channels, c = plane % d.channels, target = y * d.width + x;
    const T* gp = grad + n * d.grad_n + c * d.grad_c;
    const int64_t* ip = indices + n * d.index_n + c * d.index_c;
    int64_t y_lo, y_hi, x_lo, x_hi;
    window_range(y, g.pad_h, g.kernel_h, g.dilation_h, g.stride_h, d.out_h, y_lo, y_hi);
    window_range(x, g.pad_w, g.kernel_w, g.dilation_w, g.stride_w, d.out_w, x_lo, x_hi);
    A sum = 0;
    for (int64_t oy = y_lo; oy < y_hi; ++oy) {
      for (int64_t ox = x_lo; ox < x_hi; ++ox) {
        if (ip[oy * d.index_y + ox * d.index_x] == target) sum += convert<A>(gp[oy * d.grad_y + ox * d.grad_x]);
      }
    }
    out[i] = convert<T>(sum);
  }
}

}  // namespace

void launch_max_pool_backward(const KernelCall& call, cudaStream_t stream) {
  EMBER_ASSERT(call.inputs.size() == 2 && call.outputs.size() == 1);
  const auto& g = call.payload.get<PoolGeometry>(call.op);
  const TensorArg &grad = call.inputs[0], &indices = call.inputs[1], &out = call.outputs[0];
  const int64_t total = out.numel();
  if (total == 0) return;
  const PoolGradDims d{out.sizes[1],       out.sizes[2],       out.sizes[3],      grad.sizes[2],   grad.sizes[3],
                       grad.strides[0],    grad.strides[1],    grad.strides[2],   grad.strides[3], indices.strides[0],
                       indices.strides[1], indices.strides[2], indices.strides[3]};
  dispatch_if<FloatType>(grad.dtype, "max_pool2d_with_indices_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    max_pool_backward_kernel<T><<<grid_blocks(total), kThreads, 0, stream>>>(
        total, static_cast<T*>(out.data), static_cast<const T*>(grad.data), static_cast<const int64_t*>(indices.data),
        d, g);
  });
  check_launch(stream);
}

void launch_pool(const KernelCall& call, cudaStream_t stream) {
  EMBER_ASSERT(call.inputs.size() == 1 && !call.outputs.empty());
  const auto& g = call.payload.get<PoolGeometry>(call.op);
  const TensorArg &in = call.inputs[0], &out = call.outputs[0];
  const int64_t total = out.numel();
  if (total == 0) return;
  const PoolDims d{in.sizes[1], in.sizes[2], in.sizes[3], in.strides[0], in.strides[1], in.strides[2], in.strides[3]};
  const bool is_max = call.op == OpKind::MaxPool2d;
  dispatch_if<FloatType>(in.dtype, is_max ? "max_pool2d" : "avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto* o = static_cast<T*>(out.data);
    auto* x = static_cast<const T*>(in.data);
    if (is_max) {
      max_pool_kernel<T><<<grid_blocks(total), kThreads, 0, stream>>>(
          total, o, static_cast<int64_t*>(call.outputs.at(1).data), x, d, g);
    } else {
      avg_pool_kernel<T><<<grid_blocks(total), kThreads, 0, stream>>>(total, o, x, d, g);
    }
  });
  check_launch(stream);
}

}  // namespace ember::detail::driver
