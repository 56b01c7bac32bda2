// The op layer's helpers: the launch choke point and operand preparation.
#pragma once

#include "core/tensor_impl.h"
#include "kernels/kernel_call.h"

namespace ember::detail {

/// Runs `call` on `device` (indexed): inline for cpu, on the device's current stream
/// for cuda. See Note [One launch choke point] in kernels/kernel_call.h.
void launch(Device device, KernelCall& call);
inline void launch(Device device, KernelCall&& call) { launch(device, call); }

/// The operand view of `t` (its own sizes and strides).
TensorArg make_arg(const Tensor& t);
/// The operand view of `t` broadcast to `shape` (stride 0 along broadcast dims).
TensorArg make_arg(const Tensor& t, const IntList& shape);

/// Appends make_arg(t) (or make_arg(t, shape)) to `list`, built in place: the hot ops
/// fill their KernelCall this way rather than through an initializer list, which copies.
void add_arg(OperandList& list, const Tensor& t);
void add_arg(OperandList& list, const Tensor& t, const IntList& shape);

/// The broadcast shape of two shapes; ValueError with PyTorch's message if incompatible.
IntList broadcast_shapes(const IntList& a, const IntList& b);

/// Throws DeviceError unless every defined tensor is on the same device.
void check_same_device(const Tensor& a, const Tensor& b);

/// A new contiguous tensor on an indexed device.
inline Tensor empty_on(const IntList& shape, DType dtype, Device device) { return make_tensor(shape, dtype, device); }

}  // namespace ember::detail
