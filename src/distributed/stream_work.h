// run_on_stream: a collective's device-memory work as a host task on a stream
// (Note [Collectives as stream work] in process_group_gloo.cpp).
#pragma once

#include <functional>

#include "ember/stream.h"
#include "kernels/kernel_call.h"

namespace ember::detail::distributed {

/// Runs `body` on `stream` of `device` as a host task named `name` that writes `writes`
/// and reads `reads` (Note [Host tasks] in kernels/host_task.h), records `end` on the
/// stream right behind it, and blocks until the stream has passed `end`. The stream
/// sanitizer is not told of that wait: the host waited, but only streams that wait for
/// `end` are ordered after the task, as after a kernel. Throws when the task never runs:
/// what the launch threw (the sanitizer's DataRaceError, a CudaError), or the device's
/// sticky error when the stream skipped it. `body` must not throw.
void run_on_stream(const cuda::Stream& stream, const char* name, int device, OperandList writes, OperandList reads,
                   const std::function<void()>& body, cuda::Event& end);

}  // namespace ember::detail::distributed
