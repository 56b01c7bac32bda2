// Process-wide backend flags behind ember::backends (Note [One source of truth for float32
// precision] in backend_flags.cpp). Ops read them when they launch.
#pragma once

#include "ember/backends.h"

namespace ember::detail {

/// True when float32 matmul may use TF32 (backends::cuda::matmul.fp32_precision resolves to "tf32").
bool matmul_allows_tf32() noexcept;
/// True when float32 convolution may use TF32 (backends::cudnn.conv.fp32_precision resolves to "tf32").
bool cudnn_conv_allows_tf32() noexcept;
/// True when the recurrent modules (RNN, LSTM, GRU) may use TF32 (backends::cudnn.rnn.fp32_precision).
bool cudnn_rnn_allows_tf32() noexcept;
/// One of backends::cuda::matmul's reduced-precision switches.
bool blas_allows(backends::detail::BlasSwitch which) noexcept;

}  // namespace ember::detail
