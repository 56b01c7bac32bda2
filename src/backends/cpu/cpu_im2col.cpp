// cpu::run_im2col: unfolds convolution patches into columns (contract in nn/conv_geometry.h).
#include "backends/cpu/cpu_kernels.h"

#include <algorithm>
#include <utility>

#include "kernels/parallel.h"
#include "ember/errors.h"
#include "nn/conv_geometry.h"

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

// Planes (n, c) are independent and spread over the thread pool. Each output row is
// split once into its padding prefix, its inside span (a straight copy when the input
// row is dense and the stride 1) and its padding suffix, so no element tests bounds.
template <typename T>
void im2col(const TensorArg& in, const TensorArg& out, const nn::ConvGeometry& g) {
  const int64_t batch = in.sizes[0], channels = in.sizes[1], height = in.sizes[2], width = in.sizes[3];
  const int64_t columns = g.out_h * g.out_w;
  const int64_t sy = in.strides[2], sx = in.strides[3];
  const T* src = static_cast<const T*>(in.data);
  T* dst = static_cast<T*>(out.data);
  const int64_t plane_work = g.kernel_h * g.kernel_w * columns;
  parallel_for(0, batch * channels, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(plane_work, 1)),
               [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t n = p / channels, c = p % channels;
      const T* plane = src + n * in.strides[0] + c * in.strides[1];
      for (int64_t i = 0; i < g.kernel_h; ++i) {
        for (int64_t j = 0; j < g.kernel_w; ++j) {
          T* row = dst + (p * g.kernel_h * g.kernel_w + i * g.kernel_w + j) * columns;
          const int64_t x_offset = j * g.dilation_w - g.pad_w;
          const auto [lo, hi] = inside_columns(g.out_w, g.stride_w, g.pad_w, j * g.dilation_w, width);
          for (int64_t oy = 0; oy < g.out_h; ++oy) {
            T* o = row + oy * g.out_w;
            const int64_t y = oy * g.stride_h - g.pad_h + i * g.dilation_h;
            if (y < 0 || y >= height) {
              std::fill(o, o + g.out_w, T(0));
              continue;
            }
            std::fill(o, o + lo, T(0));
            const T* line = plane + y * sy;
            if (g.stride_w == 1 && sx == 1) {
              std::copy(line + lo + x_offset, line + hi + x_offset, o + lo);
            } else {
              for (int64_t ox = lo; ox < hi; ++ox) o[ox] = line[(ox * g.stride_w + x_offset) * sx];
            }
            std::fill(o + hi, o + g.out_w, T(0));
          }
        }
      }
    }
  });
}

}  // namespace

void run_im2col(const KernelCall& call) {
  EMBER_ASSERT(call.payload && call.inputs.size() == 1 && call.outputs.size() == 1);
  const auto& geometry = *static_cast<const nn::ConvGeometry*>(call.payload.get());
  const TensorArg& in = call.inputs[0];
  switch (in.dtype) {
    case kFloat32: im2col<float>(in, call.outputs[0], geometry); break;
    case kFloat64: im2col<double>(in, call.outputs[0], geometry); break;
    default: EMBER_ASSERT(false);
  }
}

}  // namespace ember::detail::cpu
