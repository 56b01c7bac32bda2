// Reverse-mode automatic differentiation (torch.autograd): grad mode, the graph's nodes,
// backward/grad, custom Functions and gradcheck. Backward passes follow the spec's stream
// semantics; see Note [Streaming backwards] in src/autograd/engine.cpp.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "ember/tensor.h"

namespace ember {

/// Whether ops record the graph on this thread (torch.is_grad_enabled()); on by default.
bool is_grad_enabled();
void set_grad_enabled(bool enabled);

/// Sets grad mode for a scope and restores the previous mode (torch.set_grad_enabled(mode)).
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : previous_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~AutoGradMode() { set_grad_enabled(previous_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool previous_;
};

/// torch.no_grad(): nothing in the scope is recorded.
class NoGradGuard : public AutoGradMode {
 public:
  NoGradGuard() : AutoGradMode(false) {}
};

namespace autograd {

class Node;

/// Where a gradient goes: input `input_nr` of `function`.
struct Edge {
  std::shared_ptr<Node> function;
  uint32_t input_nr = 0;
  bool is_valid() const noexcept { return function != nullptr; }
};

/// A backward function of the graph. Input i of a node is the gradient of output i of its
/// forward op; its outputs go along next_edges() to the nodes of the forward op's inputs.
class Node : public std::enable_shared_from_this<Node> {
 public:
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// PyTorch's name for the node, e.g. "MulBackward0", "AccumulateGrad".
  virtual std::string name() const = 0;
  const std::vector<Edge>& next_edges() const noexcept { return next_edges_; }
  /// Order of creation; later nodes run first when several are ready.
  uint64_t sequence_nr() const noexcept { return sequence_nr_; }
  /// How many gradients the node receives (its forward op's outputs).
  size_t num_inputs() const noexcept;

  /// Runs the node (the engine calls it): gradients in, gradients for next_edges() out.
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  /// Frees what the node saved, after a backward pass without retain_graph.
  virtual void release_variables() {}

  /// Internal state of the node (src/autograd/node.h): input metadata, hooks, locks.
  struct Internals;
  Internals& internals() const noexcept { return *internals_; }

 protected:
  explicit Node(std::vector<Edge> next_edges);
  Node(std::vector<Edge> next_edges, uint64_t sequence_nr);

 private:
  std::vector<Edge> next_edges_;
  uint64_t sequence_nr_;
  std::unique_ptr<Internals> internals_;
};

/// Computes and accumulates into .grad the gradients of `tensors` w.r.t. the graph's leaves.
/// grad_tensors: one per tensor (undefined: ones, scalars only). retain_graph defaults to
/// create_graph. `inputs`, when given, limits accumulation to those tensors.
void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
              const std::vector<Tensor>& inputs = {});

/// The gradients of `outputs` w.r.t. `inputs` (nothing accumulates into .grad).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, std::optional<bool> retain_graph = std::nullopt,
                         bool create_graph = false, bool allow_unused = false);

/// During a backward pass only: runs `callback` once the pass's last node has run, on the
/// calling thread with the caller's current streams.
void queue_callback(std::function<void()> callback);

/// Compares the analytical gradients of `fn` at `inputs` (those requiring grad) with central
/// finite differences. Returns true; a mismatch throws ember::Error naming the output, the
/// input, the element and both values (PyTorch's gradcheck with raise_exception = true).
using GradcheckFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
bool gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps = 1e-6, double atol = 1e-5,
               double rtol = 1e-3);

// ---- custom Functions (LibTorch's torch::autograd::Function) -----------------------

/// What a custom Function's forward leaves for its backward.
class AutogradContext {
 public:
  AutogradContext();
  AutogradContext(const AutogradContext&) = delete;
  AutogradContext& operator=(const AutogradContext&) = delete;

  /// Tensors the backward needs; checked against in-place changes when unpacked.
  void save_for_backward(std::vector<Tensor> to_save);
  std::vector<Tensor> get_saved_variables() const;
  /// Outputs whose gradient is never needed: backward receives zeros for them.
  void mark_non_differentiable(const std::vector<Tensor>& outputs);
  /// Whether the backward must produce a gradient for input `index` (tensor arguments only).
  bool needs_input_grad(size_t index) const;

  std::map<std::string, std::any> saved_data;

  struct State;
  State& state() const { return *state_; }

 private:
  std::shared_ptr<State> state_;
};

namespace detail {
using ForwardFn = std::function<std::vector<Tensor>(AutogradContext*)>;
using BackwardFn = std::function<std::vector<Tensor>(AutogradContext*, std::vector<Tensor>)>;
/// Runs `forward` without recording and connects its outputs to a node calling `backward`.
/// `is_tensor_arg` says which forward arguments are tensors, to map backward's results.
std::vector<Tensor> apply_function(const std::type_info& type, std::vector<Tensor> tensor_inputs,
                                   std::vector<bool> is_tensor_arg, const ForwardFn& forward, BackwardFn backward);

template <typename A>
void collect_tensor(std::vector<Tensor>& out, std::vector<bool>& is_tensor, const A& arg) {
  constexpr bool tensor = std::is_same_v<std::decay_t<A>, Tensor>;
  if constexpr (tensor) out.push_back(arg);
  is_tensor.push_back(tensor);
}
}  // namespace detail

/// CRTP base of a custom differentiable op. T provides
///   static Tensor (or std::vector<Tensor>) forward(AutogradContext*, Args...);
///   static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> grad_outputs);
/// backward returns one gradient per forward argument (undefined for non-tensors).
template <class T>
struct Function {
  template <typename... Args>
  static auto apply(Args&&... args) {
    std::vector<Tensor> tensors;
    std::vector<bool> is_tensor;
    (detail::collect_tensor(tensors, is_tensor, args), ...);
    using Result = decltype(T::forward(static_cast<AutogradContext*>(nullptr), std::forward<Args>(args)...));
    auto outputs = detail::apply_function(
        typeid(T), std::move(tensors), std::move(is_tensor),
        [&](AutogradContext* ctx) -> std::vector<Tensor> {
          if constexpr (std::is_same_v<Result, Tensor>) {
            return {T::forward(ctx, std::forward<Args>(args)...)};
          } else {
            return T::forward(ctx, std::forward<Args>(args)...);
          }
        },
        [](AutogradContext* ctx, std::vector<Tensor> grads) { return T::backward(ctx, std::move(grads)); });
    if constexpr (std::is_same_v<Result, Tensor>) {
      return outputs.at(0);
    } else {
      return outputs;
    }
  }
};

}  // namespace autograd
}  // namespace ember
