// The driver's CUDA kernels for FFT normalization and convolution unfolding
// (cuda_fft_scale.cu, cuda_im2col.cu: Im2Col and Col2Im), launched by cuda_fft.cpp and cuda_conv.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/conv_geometry.h"
#include "kernels/kernel_call.h"

namespace ember::detail::driver {

/// data[i] *= scale for `count` contiguous floats (or doubles), asynchronously on `stream`.
void launch_fft_scale(void* data, int64_t count, bool is_double, double scale, cudaStream_t stream);

/// The Im2Col contract of kernels/conv_geometry.h for a float32 or float64 input.
void launch_im2col(const TensorArg& input, const TensorArg& columns, const ConvGeometry& geometry, cudaStream_t stream);

/// The Col2Im contract of kernels/conv_geometry.h for float32 or float64 columns.
void launch_col2im(const TensorArg& columns, const TensorArg& output, const ConvGeometry& geometry,
                   cudaStream_t stream);

}  // namespace ember::detail::driver
