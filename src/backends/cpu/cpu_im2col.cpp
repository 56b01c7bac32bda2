// cpu::run_im2col: unfolds convolution patches into columns (contract in nn/conv_geometry.h).
#include "backends/cpu/cpu_kernels.h"
#include "ember/errors.h"
#include "nn/conv_geometry.h"

namespace ember::detail::cpu {
namespace {

template <typename T>
void im2col(const TensorArg& in, const TensorArg& out, const nn::ConvGeometry& g) {
  const int64_t batch = in.sizes[0], channels = in.sizes[1], height = in.sizes[2], width = in.sizes[3];
  const int64_t columns = g.out_h * g.out_w;
  const T* src = static_cast<const T*>(in.data);
  T* dst = static_cast<T*>(out.data);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      const T* plane = src + n * in.strides[0] + c * in.strides[1];
      for (int64_t i = 0; i < g.kernel_h; ++i) {
        for (int64_t j = 0; j < g.kernel_w; ++j) {
          T* row = dst + ((n * channels + c) * g.kernel_h * g.kernel_w + i * g.kernel_w + j) * columns;
          for (int64_t oy = 0; oy < g.out_h; ++oy) {
            const int64_t y = oy * g.stride_h - g.pad_h + i * g.dilation_h;
            const bool row_inside = y >= 0 && y < height;
            for (int64_t ox = 0; ox < g.out_w; ++ox) {
              const int64_t x = ox * g.stride_w - g.pad_w + j * g.dilation_w;
              row[oy * g.out_w + ox] =
                  row_inside && x >= 0 && x < width ? plane[y * in.strides[2] + x * in.strides[3]] : T(0);
            }
          }
        }
      }
    }
  }
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
