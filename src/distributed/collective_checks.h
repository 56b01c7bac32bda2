// Argument checks every backend makes the same way (gloo and nccl), and the copy that
// lands a collective's dense result in a strided tensor.
//
// Note [Strided tensors in collectives]
// Gloo reads and writes dense buffers. A tensor that is not contiguous (a transpose, a
// column, an expanded input) takes part through a contiguous copy made when the
// collective is issued (on the current stream for a cuda tensor, so before the event the
// collective waits for); a tensor the collective writes (all_reduce's and broadcast's
// tensor, all_gather's outputs, reduce_scatter's output) gets its own elements back from
// the dense result before the Work completes. A written tensor whose elements share
// memory (an expanded, stride-0 view) is refused, as PyTorch's copy back into it is.
// The nccl backend refuses non-contiguous tensors, as ProcessGroupNCCL does.
#pragma once

#include <string>
#include <vector>

#include "ember/tensor.h"

namespace ember::detail::distributed {

/// all_gather's outputs or reduce_scatter's inputs (`what`): one per rank, each with the
/// dtype and sizes of `single` (ProcessGroupGloo's "invalid tensor size at index i").
/// ValueError otherwise.
void check_list(const char* op, const char* what, const std::vector<Tensor>& list, const Tensor& single,
                int world_size);

/// A tensor a collective writes: ValueError when elements share memory (PyTorch's
/// "more than one element of the written-to tensor refers to a single memory location").
void check_writable(const Tensor& t);

/// `t` itself when contiguous, else a contiguous copy of its values (detached; on the
/// current stream for cuda tensors). Undefined stays undefined.
Tensor dense_of(const Tensor& t);

/// Copies `target.numel()` elements laid out densely at `source` (host memory) into
/// `target`'s own elements, whatever its strides; `target`'s memory is host-addressable.
void write_into(const Tensor& target, const void* source);

}  // namespace ember::detail::distributed
