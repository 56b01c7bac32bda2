// Builds without CUDA have no NCCL: the "nccl" backend is a clear error.
#include "distributed/process_group.h"
#include "ember/errors.h"

namespace ember::detail::distributed {

std::unique_ptr<ProcessGroup> make_nccl_group(const GroupSetup&) {
  fail<DistributedError>("init_process_group: the nccl backend needs ember built with CUDA (nvcc and NCCL); "
                         "this build has no CUDA driver backend: use the gloo backend");
}

}  // namespace ember::detail::distributed
