// DriverBackend::launch: the driver's end of Note [One launch choke point]. Every op
// arrives here as a KernelCall and leaves as CUDA kernel launches on one stream.
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_extensions.h"
#include "backends/cuda/cuda_ops.h"
#include "ember/errors.h"

namespace ember::detail::driver {

void DriverBackend::launch(BackendStream* stream, const KernelCall& call) {
  DriverStream& s = as_driver(stream);
  DeviceScope scope(s.device);
  cudaStream_t handle = s.handle;
  if (call.op == OpKind::Copy && call.outputs.at(0).data != nullptr && call.inputs.at(0).data != nullptr) {
    // A strided copy between two devices runs as a kernel on the stream's device that
    // reads or writes the other device's memory (UVA): that needs peer access.
    int dst = pointer_device(call.outputs.at(0).data), src = pointer_device(call.inputs.at(0).data);
    if (dst >= 0 && src >= 0 && dst != src) enable_peer_access(dst, src);
  }
  const auto i = static_cast<size_t>(call.op);
  EMBER_CHECK(i < kOpCount, ValueError, "driver launch: unknown op kind ", i);
  kCudaLaunchers[i](call, handle);  // the op list's cuda column (cuda_ops.h)
}

}  // namespace ember::detail::driver
