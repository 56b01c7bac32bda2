// HostTask: host code that runs as work on a stream, with the device memory it reads and
// writes declared as a KernelCall declares its operands.
//
// Note [Host tasks]
// A subsystem that moves device memory with host code (Gloo's transport on emulated
// devices, whose device memory is host memory) does not touch that memory from its own
// thread: it hands the code to Backend::launch_host_task as work on a stream. The code then
// runs in the stream's order (after the work queued before it, before the work queued
// after it, as cudaLaunchHostFunc), and the stream sanitizer's decorator reads `outputs`
// (writes) and `inputs` (reads) as it reads a kernel's, so races with the task are
// reported like races with a kernel. Only backends whose device memory is host memory
// run host tasks (Backend::device_memory_is_host_addressable); others refuse them.
#pragma once

#include <functional>

#include "kernels/kernel_call.h"

namespace ember::detail {

struct HostTask {
  const char* name = "";  // the operation, for reports ("all_reduce")
  int device = -1;        // the cuda device of the stream and the operands
  OperandList outputs;    // written
  OperandList inputs;     // read
  /// Runs on the stream's worker; an exception it throws becomes the device's sticky
  /// error, like a failing kernel's. Dropped unrun when the device has failed before it.
  std::function<void()> body;
};

}  // namespace ember::detail
