// Custom Functions: AutogradContext and the node that calls a user's backward.
#include <cxxabi.h>

#include <cstdlib>
#include <unordered_set>

#include <algorithm>
#include "autograd/autograd_meta.h"
#include "autograd/saved_variable.h"
#include "autograd/view_history.h"
#include "ember/errors.h"
#include "ember/factories.h"

namespace ember::autograd {

struct AutogradContext::State {
  std::vector<Tensor> to_save;       // as given, until the forward returns
  std::vector<SavedVariable> saved;  // once the node exists
  bool saved_set = false;
  std::string node_name;
  std::unordered_set<const ember::detail::TensorImpl*> non_differentiable;
  std::vector<bool> needs_input_grad;
};

AutogradContext::AutogradContext() : state_(std::make_shared<State>()) {}

void AutogradContext::save_for_backward(std::vector<Tensor> to_save) { state_->to_save = std::move(to_save); }

std::vector<Tensor> AutogradContext::get_saved_variables() const {
  if (!state_->saved_set) return state_->to_save;
  std::vector<Tensor> out;
  out.reserve(state_->saved.size());
  for (const auto& s : state_->saved) out.push_back(s.unpack(state_->node_name));
  return out;
}

void AutogradContext::mark_non_differentiable(const std::vector<Tensor>& outputs) {
  for (const Tensor& t : outputs) state_->non_differentiable.insert(t.impl());
}

bool AutogradContext::needs_input_grad(size_t index) const {
  return index < state_->needs_input_grad.size() && state_->needs_input_grad[index];
}

namespace {

std::string demangle(const std::type_info& type) {
  int status = 0;
  char* name = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string out = status == 0 && name != nullptr ? name : type.name();
  std::free(name);
  return out;
}

class CppNode final : public Node {
 public:
  CppNode(std::string name, std::vector<Edge> edges, std::vector<bool> is_tensor_arg, detail::BackwardFn backward)
      : Node(std::move(edges)),
        name_(std::move(name)),
        is_tensor_arg_(std::move(is_tensor_arg)),
        backward_(std::move(backward)) {}

  std::string name() const override { return name_; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const auto& meta = internals().inputs;
    for (size_t i = 0; i < grads.size(); ++i) {  // as PyTorch's materialize_grads
      if (!grads[i].defined()) grads[i] = zeros(meta[i].shape, TensorOptions(meta[i].dtype).device(meta[i].device));
    }
    std::vector<Tensor> result = backward_(&ctx, std::move(grads));
    size_t tensors = next_edges().size();
    if (result.size() == tensors) return result;
    EMBER_CHECK(result.size() == is_tensor_arg_.size(), Error, "function ", name_,
                " backward returned an incorrect number of gradients (expected ", is_tensor_arg_.size(), ", got ",
                result.size(), ")");
    std::vector<Tensor> out;
    out.reserve(tensors);
    for (size_t i = 0; i < result.size(); ++i) {
      if (is_tensor_arg_[i]) out.push_back(std::move(result[i]));
    }
    return out;
  }

  void release_variables() override {
    for (auto& s : ctx.state().saved) s.reset();
  }

  AutogradContext ctx;

 private:
  std::string name_;
  std::vector<bool> is_tensor_arg_;
  detail::BackwardFn backward_;
};

}  // namespace

namespace detail {

std::vector<Tensor> apply_function(const std::type_info& type, std::vector<Tensor> inputs,
                                   std::vector<bool> is_tensor_arg, const ForwardFn& forward, BackwardFn backward) {
  bool record =
      is_grad_enabled() && std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.requires_grad(); });
  if (!record) {
    AutogradContext ctx;
    NoGradGuard no_grad;
    return forward(&ctx);
  }
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) edges.push_back(gradient_edge(t));
  auto node =
      std::make_shared<CppNode>(demangle(type), std::move(edges), std::move(is_tensor_arg), std::move(backward));
  auto& state = node->ctx.state();
  state.node_name = node->name();
  for (const Tensor& t : inputs) state.needs_input_grad.push_back(t.requires_grad());

  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    outputs = forward(&node->ctx);
  }
  for (Tensor& out : outputs) {
    for (const Tensor& in : inputs) {
      if (out.defined() && out.is_same(in)) out = alias_of(out);
    }
  }
  for (const Tensor& t : state.to_save) {
    bool is_output = std::any_of(outputs.begin(), outputs.end(), [&](const Tensor& o) { return o.is_same(t); });
    state.saved.emplace_back(t, is_output);
  }
  state.to_save.clear();
  state.saved_set = true;

  auto& metadata = node->internals().inputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    metadata.push_back(InputMetadata::of(out));
    bool differentiable =
        (is_floating_point(out.dtype()) || is_complex(out.dtype())) && !state.non_differentiable.count(out.impl());
    if (!differentiable) continue;
    drop_no_grad_view(out);  // made inside forward's NoGradGuard
    AutogradMeta& meta = materialize_meta(out);
    meta.grad_fn_ = node;
    meta.output_nr_ = static_cast<uint32_t>(i);
  }
  return outputs;
}

}  // namespace detail
}  // namespace ember::autograd
