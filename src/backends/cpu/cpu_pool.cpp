// MaxPool2d, AvgPool2d and MaxPool2dBackward over {N, C, H, W} planes (contracts in
// kernels/pool_geometry.h). Planes (n, c) are independent and spread over the thread pool;
// within a plane each output scans its window with the input's own strides.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "backends/cpu/cpu_vector.h"
#include "kernels/pool_geometry.h"

namespace ember::detail::cpu {
namespace {

template <typename T>
void max_pool(const TensorArg& in, const TensorArg& out, const TensorArg& indices, const PoolGeometry& g) {
  using A = compute_t<T>;
  const int64_t channels = in.sizes[1], height = in.sizes[2], width = in.sizes[3];
  const int64_t sy = in.strides[2], sx = in.strides[3];
  const int64_t plane_out = g.out_h * g.out_w;
  const T* src = static_cast<const T*>(in.data);
  T* dst = static_cast<T*>(out.data);
  int64_t* idx = static_cast<int64_t*>(indices.data);
  const int64_t planes = in.sizes[0] * channels;
  const int64_t window = g.kernel_h * g.kernel_w;
  parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(plane_out * window, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t p = begin; p < end; ++p) {
                   const T* plane = src + (p / channels) * in.strides[0] + (p % channels) * in.strides[1];
                   T* o = dst + p * plane_out;
                   int64_t* oi = idx + p * plane_out;
                   for (int64_t oy = 0; oy < g.out_h; ++oy) {
                     const int64_t y0 = oy * g.stride_h - g.pad_h;
                     for (int64_t ox = 0; ox < g.out_w; ++ox) {
                       const int64_t x0 = ox * g.stride_w - g.pad_w;
                       A best = -INFINITY;
                       int64_t best_index = -1;
                       for (int64_t i = 0; i < g.kernel_h; ++i) {
                         const int64_t y = y0 + i * g.dilation_h;
                         if (y < 0 || y >= height) continue;
                         for (int64_t j = 0; j < g.kernel_w; ++j) {
                           const int64_t x = x0 + j * g.dilation_w;
                           if (x < 0 || x >= width) continue;
                           const A v = convert<A>(plane[y * sy + x * sx]);
                           if (best_index < 0 || v > best || (v != v && best == best))
                             best = v, best_index = y * width + x;
                         }
                       }
                       o[oy * g.out_w + ox] = convert<T>(best);
                       oi[oy * g.out_w + ox] = best_index;
                     }
                   }
                 }
               });
}

// The common case: 2x2 windows, stride 2, no padding or dilation, dense rows. The window
// always lies inside the input, so the loop has no bounds checks, and it is written
// without branches (selects): the comparisons on real data are unpredictable, and the
// float row vectorises (AVX2 and baseline clones).
// Window order a, b, c, d; the first maximum wins, NaN beats everything: a later value v
// replaces best when best is not NaN and !(v <= best) (v is larger or NaN).
template <typename T>
inline void max_pool_2x2_row(const T* __restrict r0, const T* __restrict r1, T* __restrict o, int64_t* __restrict oi,
                             int64_t out_w, int64_t base, int64_t width) {
  using A = compute_t<T>;
  for (int64_t ox = 0; ox < out_w; ++ox) {
    const A a = convert<A>(r0[2 * ox]), b = convert<A>(r0[2 * ox + 1]);
    const A c = convert<A>(r1[2 * ox]), d = convert<A>(r1[2 * ox + 1]);
    A best = a;
    int64_t offset = 0;
    bool take = best == best && !(b <= best);
    best = take ? b : best, offset = take ? 1 : offset;
    take = best == best && !(c <= best);
    best = take ? c : best, offset = take ? width : offset;
    take = best == best && !(d <= best);
    best = take ? d : best, offset = take ? width + 1 : offset;
    o[ox] = convert<T>(best);
    oi[ox] = base + 2 * ox + offset;
  }
}

EMBER_VECTOR_CLONES void max_pool_2x2_row_float(const float* __restrict r0, const float* __restrict r1,
                                                float* __restrict o, int64_t* __restrict oi, int64_t out_w,
                                                int64_t base, int64_t width) {
  max_pool_2x2_row<float>(r0, r1, o, oi, out_w, base, width);
}

template <typename T>
bool max_pool_2x2(const TensorArg& in, const TensorArg& out, const TensorArg& indices, const PoolGeometry& g) {
  if (g.kernel_h != 2 || g.kernel_w != 2 || g.stride_h != 2 || g.stride_w != 2 || g.pad_h || g.pad_w ||
      g.dilation_h != 1 || g.dilation_w != 1 || in.strides[3] != 1 || 2 * g.out_h > in.sizes[2] ||
      2 * g.out_w > in.sizes[3])
    return false;
  const int64_t channels = in.sizes[1], width = in.sizes[3], sy = in.strides[2];
  const int64_t plane_out = g.out_h * g.out_w;
  const T* src = static_cast<const T*>(in.data);
  T* dst = static_cast<T*>(out.data);
  int64_t* idx = static_cast<int64_t*>(indices.data);
  parallel_for(0, in.sizes[0] * channels, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(4 * plane_out, 1)),
               [&](int64_t begin, int64_t end) {
                 // float16 and bfloat16 rows are widened to float (exactly) for the vector loop; the
                 // maximum, one of the inputs, narrows back exactly.
                 std::vector<float> wide;
                 if constexpr (is_reduced_float_v<T>) wide.resize(static_cast<size_t>(5 * g.out_w));
                 for (int64_t p = begin; p < end; ++p) {
                   const T* plane = src + (p / channels) * in.strides[0] + (p % channels) * in.strides[1];
                   for (int64_t oy = 0; oy < g.out_h; ++oy) {
                     const T* r0 = plane + 2 * oy * sy;
                     T* o = dst + p * plane_out + oy * g.out_w;
                     int64_t* oi = idx + p * plane_out + oy * g.out_w;
                     if constexpr (std::is_same_v<T, float>) {
                       max_pool_2x2_row_float(r0, r0 + sy, o, oi, g.out_w, 2 * oy * width, width);
                     } else if constexpr (is_reduced_float_v<T>) {
                       float *w0 = wide.data(), *w1 = w0 + 2 * g.out_w, *wo = w1 + 2 * g.out_w;
                       for (int64_t x = 0; x < 2 * g.out_w; ++x)
                         w0[x] = convert<float>(r0[x]), w1[x] = convert<float>(r0[sy + x]);
                       max_pool_2x2_row_float(w0, w1, wo, oi, g.out_w, 2 * oy * width, width);
                       for (int64_t x = 0; x < g.out_w; ++x) o[x] = convert<T>(wo[x]);
                     } else {
                       max_pool_2x2_row<T>(r0, r0 + sy, o, oi, g.out_w, 2 * oy * width, width);
                     }
                   }
                 }
               });
  return true;
}

template <typename T>
void avg_pool(const TensorArg& in, const TensorArg& out, const PoolGeometry& g) {
  using A = compute_t<T>;
  const int64_t channels = in.sizes[1], height = in.sizes[2], width = in.sizes[3];
  const int64_t sy = in.strides[2], sx = in.strides[3];
  const int64_t plane_out = g.out_h * g.out_w;
  const T* src = static_cast<const T*>(in.data);
  T* dst = static_cast<T*>(out.data);
  parallel_for(0, in.sizes[0] * channels,
               std::max<int64_t>(1, kGrainSize / std::max<int64_t>(plane_out * g.kernel_h * g.kernel_w, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t p = begin; p < end; ++p) {
                   const T* plane = src + (p / channels) * in.strides[0] + (p % channels) * in.strides[1];
                   T* o = dst + p * plane_out;
                   for (int64_t oy = 0; oy < g.out_h; ++oy) {
                     int64_t y0 = oy * g.stride_h - g.pad_h, y1 = std::min(y0 + g.kernel_h, height + g.pad_h);
                     for (int64_t ox = 0; ox < g.out_w; ++ox) {
                       int64_t x0 = ox * g.stride_w - g.pad_w, x1 = std::min(x0 + g.kernel_w, width + g.pad_w);
                       const int64_t padded_size = (y1 - y0) * (x1 - x0);
                       const int64_t ya = std::max<int64_t>(y0, 0), yb = std::min(y1, height);
                       const int64_t xa = std::max<int64_t>(x0, 0), xb = std::min(x1, width);
                       A sum = 0;
                       for (int64_t y = ya; y < yb; ++y) {
                         for (int64_t x = xa; x < xb; ++x) sum += convert<A>(plane[y * sy + x * sx]);
                       }
                       const int64_t divisor = g.divisor_override    ? g.divisor_override
                                               : g.count_include_pad ? padded_size
                                                                     : (yb - ya) * (xb - xa);
                       o[oy * g.out_w + ox] = convert<T>(sum / static_cast<A>(divisor));
                     }
                   }
                 }
               });
}

// Each output gradient is added at the input position its index names; a plane is
// written by one thread, in output order, so the sums do not depend on the thread count.
template <typename T>
void max_pool_backward(const TensorArg& grad, const TensorArg& indices, const TensorArg& out) {
  using A = compute_t<T>;
  const int64_t channels = grad.sizes[1], out_h = grad.sizes[2], out_w = grad.sizes[3];
  const int64_t plane_in = out.sizes[2] * out.sizes[3];
  const T* g = static_cast<const T*>(grad.data);
  const int64_t* idx = static_cast<const int64_t*>(indices.data);
  T* dst = static_cast<T*>(out.data);
  parallel_for(
      0, grad.sizes[0] * channels, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(out_h * out_w + plane_in, 1)),
      [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
          const int64_t n = p / channels, c = p % channels;
          const T* gp = g + n * grad.strides[0] + c * grad.strides[1];
          const int64_t* ip = idx + n * indices.strides[0] + c * indices.strides[1];
          T* o = dst + p * plane_in;
          std::fill(o, o + plane_in, T(0));
          for (int64_t oy = 0; oy < out_h; ++oy) {
            for (int64_t ox = 0; ox < out_w; ++ox) {
              const int64_t k = ip[oy * indices.strides[2] + ox * indices.strides[3]];
              if (k < 0 || k >= plane_in) continue;  // a window entirely in the padding
              o[k] = convert<T>(convert<A>(o[k]) + convert<A>(gp[oy * grad.strides[2] + ox * grad.strides[3]]));
            }
          }
        }
      });
}

}  // namespace

void run_max_pool_backward(const KernelCall& call) {
  EMBER_ASSERT(call.inputs.size() == 2 && call.outputs.size() == 1);
  const TensorArg &grad = call.inputs[0], &indices = call.inputs[1], &out = call.outputs[0];
  EMBER_ASSERT(grad.sizes.size() == 4 && indices.sizes == grad.sizes && out.sizes.size() == 4);
  expect_dtype("max_pool2d_backward", indices, kInt64);
  expect_dtype("max_pool2d_backward", out, grad.dtype);
  if (out.numel() == 0) return;
  dispatch(grad.dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (!is_floating_v<T>) {
      not_implemented("max_pool2d_with_indices_backward", grad.dtype);
    } else {
      max_pool_backward<T>(grad, indices, out);
    }
  });
}

void run_pool(const KernelCall& call) {
  EMBER_ASSERT(call.inputs.size() == 1 && !call.outputs.empty());
  const auto& g = call.payload.get<PoolGeometry>(call.op);
  const TensorArg &in = call.inputs[0], &out = call.outputs[0];
  EMBER_ASSERT(in.sizes.size() == 4);
  if (out.numel() == 0) return;
  const bool is_max = call.op == OpKind::MaxPool2d;
  dispatch(in.dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (!is_floating_v<T>) {
      not_implemented(is_max ? "max_pool2d" : "avg_pool2d", in.dtype);
    } else if (is_max) {
      EMBER_ASSERT(call.outputs.size() == 2);
      if (!max_pool_2x2<T>(in, out, call.outputs[1], g)) max_pool<T>(in, out, call.outputs[1], g);
    } else {
      avg_pool<T>(in, out, g);
    }
  });
}

}  // namespace ember::detail::cpu
