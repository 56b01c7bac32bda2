#include "kernels/kernel_payload.h"

#include "ember/errors.h"
#include "kernels/op_name.h"

namespace ember::detail {

const char* payload_kind_name(PayloadKind kind) noexcept {
  switch (kind) {
    case PayloadKind::None: return "no payload";
    case PayloadKind::FftPlan: return "an FFT plan";
    case PayloadKind::ConvGeometry: return "a ConvGeometry";
    case PayloadKind::PoolGeometry: return "a PoolGeometry";
    case PayloadKind::FusedStep: return "a FusedStep";
  }
  return "an unknown payload";
}

void KernelPayload::wrong_kind(OpKind op, PayloadKind expected) const {
  const std::string what = cat("the ", op_name(op), " kernel expects ", payload_kind_name(expected),
                               " payload, but got ", payload_kind_name(kind_));
  assert_failed(what.c_str(), __FILE__, __LINE__);
}

}  // namespace ember::detail
