// Builds without CUDA have no NCCL: the "nccl" backend is a clear error (require_built,
// which the process group calls first; the rest is never reached).
#include "backends/cuda/nccl_communicator.h"
#include "ember/errors.h"

namespace ember::detail::nccl {

void require_built() {
  fail<DistributedError>(
      "init_process_group: the nccl backend needs ember built with CUDA (nvcc and NCCL); "
      "this build has no CUDA driver backend: use the gloo backend");
}

UniqueId make_unique_id() {
  require_built();
  return {};
}
void check_dtype(DType, const char*) { require_built(); }

Communicator::Communicator(const UniqueId&, int, int, int device) : device_(device) { require_built(); }
Communicator::~Communicator() = default;
void Communicator::abort() noexcept {}
void Communicator::all_reduce(void*, size_t, DType, Reduction, BackendStream*, const char*) { require_built(); }
void Communicator::broadcast(const void*, void*, size_t, DType, int, BackendStream*, const char*) { require_built(); }
void Communicator::reduce(const void*, void*, size_t, DType, Reduction, int, BackendStream*, const char*) {
  require_built();
}
void Communicator::group_start(const char*) { require_built(); }
void Communicator::group_end(const char*) { require_built(); }

}  // namespace ember::detail::nccl
