// Tensor::str and operator<<: copy to the host, then PyTorch's repr (core/format.h).
#include <ostream>

#include "core/format.h"
#include "core/tensor_impl.h"
#include "ember/ops.h"
#include "ops/launch.h"
#include "sanitizer/sanitizer.h"

namespace ember {

std::string Tensor::str() const {
  if (!defined()) return "[ Tensor (undefined) ]";
  Tensor host = cpu();
  if (detail::sanitizer::enabled() && host.is_pinned()) [[unlikely]]  // a host read: Note [Host accesses]
    detail::sanitizer::on_host_access(detail::make_arg(host), /*write=*/false, "str", "self");
  return detail::format_tensor(host.impl()->data(), host.dtype(), host.sizes(), host.strides(), device());
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.str(); }

}  // namespace ember
