// cpu::run_im2col unfolds convolution patches into columns; cpu::run_col2im sums columns
// back into the input's shape (contracts in kernels/conv_geometry.h).
#include "backends/cpu/cpu_kernels.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "ember/errors.h"
#include "kernels/conv_geometry.h"
#include "kernels/convert.h"
#include "kernels/parallel.h"

namespace ember::detail::cpu {
namespace {

// First output column whose input column x = ox * stride - pad + offset is >= 0, and one
// past the last whose x is < width; columns outside [lo, hi) read padding.
std::pair<int64_t, int64_t> inside_columns(int64_t out_w, int64_t stride, int64_t pad, int64_t offset, int64_t width) {
  const int64_t first = pad - offset;  // ox * stride >= first
  int64_t lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  const int64_t last = width - 1 + pad - offset;  // ox * stride <= last
  int64_t hi = last < 0 ? 0 : last / stride + 1;
  lo = std::min(lo, out_w);
  hi = std::clamp(hi, lo, out_w);
  return {lo, hi};
}

// Runs of a convolution's row are short (an output row: 7 to 30 elements in a small CNN),
// where a call to memmove or memset per run costs more than the run itself. write_run
// copies n elements from `from`, or writes zeros when `from` is null, inline: whole
// 32-byte chunks, the last one overlapping the one before.
template <typename T>
inline void write_run(const T* __restrict from, T* __restrict to, int64_t n) {
  constexpr int64_t kChunk = 32 / sizeof(T);
  alignas(32) static constexpr T kZeros[kChunk] = {};
  auto source = [&](int64_t k) { return from ? from + k : kZeros; };
  if (n >= kChunk) {
    int64_t k = 0;
    for (; k + kChunk <= n; k += kChunk) std::memcpy(to + k, source(k), 32);
    if (k < n) std::memcpy(to + n - kChunk, source(n - kChunk), 32);
    return;
  }
  for (int64_t k = 0; k < n; ++k) to[k] = from ? from[k] : T(0);
}

// Planes (n, c) are independent and spread over the thread pool. Each output row is
// split once into its padding prefix, its inside span (a straight copy when the input
// row is dense and the stride 1) and its padding suffix, so no element tests bounds.
// Depth and height are the singleton loops of Note [Convolution spatial dims] for 2-D
// and 1-D convolutions.
template <typename T>
void im2col(const TensorArg& in, const TensorArg& out, const ConvGeometry& g) {
  const int64_t batch = in.sizes[0], channels = in.sizes[1];
  const ConvSpatialExtent e = conv_spatial_extent(in.sizes, in.strides);
  const int64_t columns = g.positions(), plane_columns = g.out_h * g.out_w;
  EMBER_ASSERT(columns <= 1 || out.strides[2] == 1);
  const T* src = static_cast<const T*>(in.data);
  T* dst = static_cast<T*>(out.data);
  const int64_t plane_work = g.kernel_volume() * columns;
  parallel_for(0, batch * channels, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(plane_work, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t p = begin; p < end; ++p) {
                   const int64_t n = p / channels, c = p % channels;
                   const T* plane = src + n * in.strides[0] + c * in.strides[1];
                   for (int64_t a = 0; a < g.kernel_d; ++a) {
                     for (int64_t i = 0; i < g.kernel_h; ++i) {
                       for (int64_t j = 0; j < g.kernel_w; ++j) {
                         const int64_t r = ((c * g.kernel_d + a) * g.kernel_h + i) * g.kernel_w + j;
                         T* row = dst + n * out.strides[0] + r * out.strides[1];
                         const int64_t x_offset = j * g.dilation_w - g.pad_w;
                         const auto [lo, hi] = inside_columns(g.out_w, g.stride_w, g.pad_w, j * g.dilation_w, e.width);
                         for (int64_t oz = 0; oz < g.out_d; ++oz) {
                           const int64_t z = oz * g.stride_d - g.pad_d + a * g.dilation_d;
                           if (z < 0 || z >= e.depth) {
                             write_run<T>(nullptr, row + oz * plane_columns, plane_columns);
                             continue;
                           }
                           for (int64_t oy = 0; oy < g.out_h; ++oy) {
                             T* o = row + (oz * g.out_h + oy) * g.out_w;
                             const int64_t y = oy * g.stride_h - g.pad_h + i * g.dilation_h;
                             if (y < 0 || y >= e.height) {
                               write_run<T>(nullptr, o, g.out_w);
                               continue;
                             }
                             write_run<T>(nullptr, o, lo);
                             const T* line = plane + z * e.stride_d + y * e.stride_h;
                             if (g.stride_w == 1 && e.stride_w == 1) {
                               write_run(line + lo + x_offset, o + lo, hi - lo);
                             } else {
                               for (int64_t ox = lo; ox < hi; ++ox)
                                 o[ox] = line[(ox * g.stride_w + x_offset) * e.stride_w];
                             }
                             write_run<T>(nullptr, o + hi, g.out_w - hi);
                           }
                         }
                       }
                     }
                   }
                 }
               });
}

// The adjoint walk: each plane (n, c) of the output is zeroed, then every column row
// (c, a, i, j) is added into the input rows it was read from, with the same split into
// padding and inside spans. Planes are independent, so the pool needs no atomics and the
// order of the additions (and so the result) does not depend on the thread count.
// Float16 and bfloat16 planes are summed in float and rounded once when done, as the driver's
// Col2Im does (each element's additions in the same order: kernel offset by kernel offset).
template <typename T>
void col2im(const TensorArg& in, const TensorArg& out, const ConvGeometry& g) {
  using Acc = compute_t<T>;
  const int64_t batch = out.sizes[0], channels = out.sizes[1];
  const ConvSpatialExtent e = conv_spatial_extent(out.sizes, out.strides);  // contiguous
  const int64_t plane_size = e.depth * e.height * e.width;
  const int64_t s0 = in.strides[0], s1 = in.strides[1], s2 = in.strides[2];
  const T* src = static_cast<const T*>(in.data);
  T* dst = static_cast<T*>(out.data);
  const int64_t plane_work = g.kernel_volume() * g.positions() + plane_size;
  parallel_for(0, batch * channels, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(plane_work, 1)),
               [&](int64_t begin, int64_t end) {
                 std::vector<Acc> wide(std::is_same_v<Acc, T> ? 0 : static_cast<size_t>(plane_size));
                 for (int64_t p = begin; p < end; ++p) {
                   const int64_t n = p / channels, c = p % channels;
                   Acc* plane;
                   if constexpr (std::is_same_v<Acc, T>) plane = dst + p * plane_size;
                   else plane = wide.data();
                   std::fill(plane, plane + plane_size, Acc(0));
                   for (int64_t a = 0; a < g.kernel_d; ++a) {
                     for (int64_t i = 0; i < g.kernel_h; ++i) {
                       for (int64_t j = 0; j < g.kernel_w; ++j) {
                         const T* row = src + n * s0 + (((c * g.kernel_d + a) * g.kernel_h + i) * g.kernel_w + j) * s1;
                         const int64_t x_offset = j * g.dilation_w - g.pad_w;
                         const auto [lo, hi] = inside_columns(g.out_w, g.stride_w, g.pad_w, j * g.dilation_w, e.width);
                         for (int64_t oz = 0; oz < g.out_d; ++oz) {
                           const int64_t z = oz * g.stride_d - g.pad_d + a * g.dilation_d;
                           if (z < 0 || z >= e.depth) continue;
                           for (int64_t oy = 0; oy < g.out_h; ++oy) {
                             const int64_t y = oy * g.stride_h - g.pad_h + i * g.dilation_h;
                             if (y < 0 || y >= e.height) continue;
                             Acc* line = plane + (z * e.height + y) * e.width;
                             const T* r = row + (oz * g.out_h + oy) * g.out_w * s2;
                             if (g.stride_w == 1 && s2 == 1) {
                               Acc* target = line + x_offset;
                               for (int64_t ox = lo; ox < hi; ++ox) target[ox] += convert<Acc>(r[ox]);
                             } else {
                               for (int64_t ox = lo; ox < hi; ++ox)
                                 line[ox * g.stride_w + x_offset] += convert<Acc>(r[ox * s2]);
                             }
                           }
                         }
                       }
                     }
                   }
                   if constexpr (!std::is_same_v<Acc, T>) {
                     T* target = dst + p * plane_size;
                     for (int64_t k = 0; k < plane_size; ++k) target[k] = convert<T>(plane[k]);
                   }
                 }
               });
}

}  // namespace

void run_col2im(const KernelCall& call) {
  EMBER_ASSERT(call.inputs.size() == 1 && call.outputs.size() == 1);
  const auto& geometry = call.payload.get<ConvGeometry>(call.op);
  const TensorArg& out = call.outputs[0];
  EMBER_ASSERT(out.sizes.size() >= 3 && out.sizes.size() <= 5 && call.inputs[0].sizes.size() == 3);
  if (out.numel() == 0) return;
  switch (out.dtype) {
    case kFloat32: col2im<float>(call.inputs[0], out, geometry); break;
    case kFloat64: col2im<double>(call.inputs[0], out, geometry); break;
    case kFloat16: col2im<Half>(call.inputs[0], out, geometry); break;
    case kBFloat16: col2im<BFloat16>(call.inputs[0], out, geometry); break;
    default: EMBER_ASSERT(false);
  }
}

void run_im2col(const KernelCall& call) {
  EMBER_ASSERT(call.inputs.size() == 1 && call.outputs.size() == 1);
  const auto& geometry = call.payload.get<ConvGeometry>(call.op);
  const TensorArg& in = call.inputs[0];
  switch (in.dtype) {
    case kFloat32: im2col<float>(in, call.outputs[0], geometry); break;
    case kFloat64: im2col<double>(in, call.outputs[0], geometry); break;
    // float16, bfloat16: a copy of their bits (zero bits are +0)
    case kFloat16:
    case kBFloat16: im2col<uint16_t>(in, call.outputs[0], geometry); break;
    default: EMBER_ASSERT(false);
  }
}

}  // namespace ember::detail::cpu
