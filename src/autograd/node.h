// Node internals: what each input of a node expects, and the hooks on it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/tensor_impl.h"
#include "ember/autograd.h"
#include "ember/stream.h"

namespace ember::autograd {

using TensorHook = std::function<Tensor(const Tensor&)>;

/// The gradient one input of a node expects: the forward output's shape, dtype and
/// device, and (cuda only) the stream that was current on its device when the forward op
/// ran, which is the stream the backward uses (Note [Streaming backwards]).
struct InputMetadata {
  IntList shape;
  DType dtype = kFloat32;
  Device device{kCPU};
  std::optional<cuda::Stream> stream;

  /// Metadata of `t`, with its device's current stream when `t` is on a cuda device.
  static InputMetadata of(const Tensor& t);
};

struct Node::Internals {
  std::vector<InputMetadata> inputs;
  /// Serialises apply() and hook changes when two backward passes share a node.
  std::mutex mutex;
  /// register_hook() on a non-leaf output: hooks on this node's input (that output).
  std::map<uint32_t, std::vector<std::pair<unsigned, TensorHook>>> tensor_hooks;
  /// retain_grad() on a non-leaf output: the tensor whose grad() receives the gradient.
  std::map<uint32_t, std::weak_ptr<ember::detail::TensorImpl>> retained;
};

/// The stream a node runs on: the stream of its first cuda input, if any.
std::optional<cuda::Stream> node_stream(const Node& node);

/// What register_hook() hook `handle` returned for `value`: `value` itself when it returned
/// an undefined tensor, else its result, which must have value's size, dtype and device
/// (PyTorch's check_single_result: "hook ... has changed the size of value").
Tensor hook_result(unsigned handle, const Tensor& value, Tensor result);

/// A process-wide counter for hook handles.
unsigned next_hook_handle();

}  // namespace ember::autograd
