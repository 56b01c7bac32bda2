// Tensor::str and operator<<: copy to the host, then PyTorch's repr (core/format.h).
#include <ostream>

#include "core/format.h"
#include "ember/ops.h"

namespace ember {

std::string Tensor::str() const {
  if (!defined()) return "[ Tensor (undefined) ]";
  Tensor host = cpu();
  return detail::format_tensor(host.data_ptr(), host.dtype(), host.sizes(), host.strides(), device());
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.str(); }

}  // namespace ember
