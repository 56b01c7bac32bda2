// Process-wide backend flags behind ember::backends (TF32).
#pragma once

namespace ember::detail {

/// True when float32 matmul may use TF32 (precision "high" or "medium").
bool matmul_allows_tf32() noexcept;
/// True when float32 convolution may use TF32 (backends::cudnn.allow_tf32).
bool cudnn_allows_tf32() noexcept;

}  // namespace ember::detail
