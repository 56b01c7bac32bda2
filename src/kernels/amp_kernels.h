// Mixed precision's scale update, written once for host and device (OpKind::AmpUpdateScale):
// PyTorch's _amp_update_scale_ arithmetic.
#pragma once

#include <cmath>
#include <cstdint>

#include "ember/half.h"

namespace ember::detail {

/// A step with found_inf != 0 multiplies the scale by backoff_factor and restarts the count
/// of clean steps; a clean step counts, and the growth_interval-th in a row multiplies the
/// scale by growth_factor (unless that overflows to inf) and restarts the count.
EMBER_HOST_DEVICE inline void amp_update_scale(float& scale, int32_t& growth_tracker, float found_inf,
                                               float growth_factor, float backoff_factor, int32_t growth_interval) {
  if (found_inf != 0.0f) {
    scale *= backoff_factor;
    growth_tracker = 0;
    return;
  }
  const int32_t successful = growth_tracker + 1;
  if (successful == growth_interval) {
    const float grown = scale * growth_factor;
    if (std::isfinite(grown)) scale = grown;
    growth_tracker = 0;
  } else {
    growth_tracker = successful;
  }
}

}  // namespace ember::detail
