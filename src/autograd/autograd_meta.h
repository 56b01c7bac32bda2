// AutogradMeta: what a tensor carries once autograd has seen it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "core/tensor_impl.h"

namespace ember::autograd {

/// How a view was made (PyTorch's CreationMeta): whether an in-place change of it, or of
/// its base, may be recorded (Note [Views and in-place ops] in view_history.h).
enum class CreationMeta : uint8_t {
  Default,          // made in grad mode by a single-output view op
  NoGradMode,       // made while grad mode was off
  MultiOutputNode,  // one of several views one op returned (split, chunk)
};

struct AutogradMeta final : ember::detail::AutogradMetaInterface {
  bool requires_grad() const override {
    return requires_grad_ || grad_fn_ != nullptr || (view_base_.defined() && view_base_.requires_grad());
  }

  bool requires_grad_ = false;  // set on leaves by the user
  Tensor grad_;
  std::shared_ptr<Node> grad_fn_;  // null for leaves
  uint32_t output_nr_ = 0;
  bool retains_grad_ = false;
  /// Leaves: the node that accumulates into grad_, alive while a graph uses it.
  std::weak_ptr<Node> grad_accumulator_;
  /// Leaves: register_hook() hooks, run before accumulation.
  std::vector<std::pair<unsigned, TensorHook>> hooks_;
  std::vector<std::function<void(Tensor&)>> post_accumulate_hooks_;
  /// Views: the root base they view, and the storage version grad_fn_ was made at
  /// (Note [Views and in-place ops] in view_history.h).
  Tensor view_base_;
  std::atomic<uint32_t> view_version_{0};
  /// Views: how the view was made; anything but Default may not be changed in place
  /// while that is recorded.
  CreationMeta creation_meta_ = CreationMeta::Default;
  std::mutex mutex_;
};

/// The tensor's metadata, or null.
inline AutogradMeta* meta_of(const Tensor& t) {
  return t.defined() ? static_cast<AutogradMeta*>(t.impl()->autograd_meta()) : nullptr;
}
/// The tensor's metadata, created if absent.
AutogradMeta& materialize_meta(const Tensor& t);

/// The edge a gradient for `t` goes along: its grad_fn's input, or its leaf accumulator
/// (created on first use, on the stream current then). Invalid if t does not require grad.
Edge gradient_edge(const Tensor& t);

/// A tensor sharing t's storage and geometry, without autograd metadata.
Tensor alias_of(const Tensor& t);

}  // namespace ember::autograd
