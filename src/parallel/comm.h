// Moving tensors between the devices of one process for DataParallel, as autograd
// Functions (PyTorch's torch/nn/parallel/_functions.py over torch.cuda.comm).
//
// Note [Streams of DataParallel's copies]
// Forward copies run on the calling thread's current streams, which are also the streams
// the replicas run on (parallel_apply.h): a cross-device copy runs on the source side's
// current stream, ordered after and before the destination's (Note [Copy semantics]).
// The autograd engine runs each backward on the stream its node kept from the forward;
// a backward that reads gradients on several devices (Broadcast's, Scatter's) makes
// each device's forward-time stream current while it reads there, because the engine
// made exactly those streams wait for the gradients.
#pragma once

#include <vector>

#include "ember/tensor.h"

namespace ember::detail::parallel {

/// Splits `input` along `dim` into at most devices.size() chunks (Tensor::chunk's sizes:
/// a short dimension makes fewer) and copies chunk i to cuda device devices[i].
/// Differentiable: the backward gathers the chunks' gradients onto input's device.
std::vector<Tensor> scatter(const Tensor& input, const std::vector<int>& devices, int64_t dim);

/// Concatenates `tensors` along `dim` on cuda device `device` (-1: the cpu); 0-dim
/// tensors are gathered as a vector, as PyTorch's Gather. Differentiable: the backward
/// scatters the gradient back, each part to its tensor's device.
Tensor gather(const std::vector<Tensor>& tensors, int device, int64_t dim);

/// Copies of `tensors` (all on cuda device devices[0]) on every device: result[d][j] is
/// tensors[j] on devices[d]; result[0] shares storage with `tensors`. Tensors of one dtype
/// travel together in buckets of up to 10 MiB. Differentiable (PyTorch's Broadcast): the
/// backward sums each tensor's copies' gradients on devices[0] (ReduceAddCoalesced); a
/// tensor that does not require grad gets copies that do not either.
std::vector<std::vector<Tensor>> broadcast(const std::vector<Tensor>& tensors, const std::vector<int>& devices);

/// The same copies, recorded by no graph (PyTorch's comm.broadcast_coalesced).
std::vector<std::vector<Tensor>> broadcast_coalesced(const std::vector<Tensor>& tensors,
                                                     const std::vector<int>& devices);

}  // namespace ember::detail::parallel
