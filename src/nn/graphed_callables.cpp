// make_graphed_callables: callables whose forward and backward replay captured graphs
// (torch.cuda.make_graphed_callables).
//
// As PyTorch's graphs.py: each callable's graph input surface is its sample args (which
// become its static inputs) and, for a module, its parameters. Warm-up runs every
// callable's forward and backward (autograd::grad, so nothing accumulates into .grad) on a
// side stream, so that lazy state (the allocator's cache, module buffers) settles outside
// the captures. Then each forward is captured in the callables' order and each backward
// (autograd::grad of the static outputs that require grad w.r.t. the surface entries that
// require grad, with static grad outputs) in reverse order, the order they run in a
// training step, all into one memory pool. A graphed call goes through a custom Function
// whose tensor arguments are the surface, so the backward's results reach the inputs' and
// parameters' .grad through the ordinary accumulation.
#include <memory>

#include "ember/amp.h"
#include "ember/autograd.h"
#include "ember/cuda.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/nn/module.h"
#include "ember/tensor.h"

namespace ember::cuda {

struct GraphedCallable::State {
  explicit State(GraphCallable c) : callable(std::move(c)) {}
  GraphCallable callable;
  bool training = true;         // the module's mode at capture
  std::vector<Tensor> surface;  // the static inputs, then the module's parameters
  size_t num_inputs = 0;
  std::vector<Tensor> static_outputs;
  std::vector<Tensor> static_grad_outputs;  // undefined for an output that does not require grad
  std::vector<Tensor> static_grad_inputs;   // per surface entry; undefined where none is computed
  bool has_backward = false;
  CUDAGraph forward_graph, backward_graph;

  std::vector<Tensor> static_inputs() const {
    return {surface.begin(), surface.begin() + static_cast<std::ptrdiff_t>(num_inputs)};
  }
};

namespace {

// The surface entries that require grad, and the outputs that do.
std::vector<Tensor> requiring_grad(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> result;
  for (const Tensor& t : tensors)
    if (t.requires_grad()) result.push_back(t);
  return result;
}

std::vector<Tensor> replay(const std::shared_ptr<GraphedCallable::State>& state, const std::vector<Tensor>& inputs) {
  GraphedCallable::State& s = *state;
  EMBER_CHECK(inputs.size() == s.num_inputs, ValueError, "make_graphed_callables: the graphed callable takes ",
              s.num_inputs, " inputs (its sample_args'), got ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& input = inputs[i];
    const Tensor& sample = s.surface[i];
    EMBER_CHECK(input.defined() && input.sizes() == sample.sizes() && input.dtype() == sample.dtype() &&
                    input.device() == sample.device(),
                ValueError, "make_graphed_callables: the input must have the sample's shape, dtype and device");
    // The backward graph computes an input's gradient only when its sample required one.
    EMBER_CHECK(!input.requires_grad() || sample.requires_grad() || !is_grad_enabled(), ValueError,
                "make_graphed_callables: the input requires_grad but the sample did not, so the captured backward "
                "computes no gradient for it (the requires_grad of the sample must match the real inputs')");
  }
  std::vector<Tensor> args = inputs;
  args.insert(args.end(), s.surface.begin() + static_cast<std::ptrdiff_t>(s.num_inputs), s.surface.end());
  std::vector<bool> is_tensor(args.size(), true);
  return autograd::detail::apply_function(
      typeid(GraphedCallable), args, std::move(is_tensor),
      [state, inputs](autograd::AutogradContext*) -> std::vector<Tensor> {
        GraphedCallable::State& g = *state;
        for (size_t i = 0; i < inputs.size(); ++i)
          if (!inputs[i].is_same(g.surface[i])) g.surface[i].detach().copy_(inputs[i]);
        g.forward_graph.replay();
        std::vector<Tensor> outputs;
        for (const Tensor& o : g.static_outputs) outputs.push_back(o.detach());
        return outputs;
      },
      [state](autograd::AutogradContext*, std::vector<Tensor> grads) -> std::vector<Tensor> {
        GraphedCallable::State& g = *state;
        if (!g.has_backward) return std::vector<Tensor>(g.surface.size());
        for (size_t j = 0; j < g.static_grad_outputs.size(); ++j) {
          Tensor& slot = g.static_grad_outputs[j];
          if (!slot.defined()) continue;
          if (j < grads.size() && grads[j].defined()) slot.copy_(grads[j]);
          else slot.zero_();
        }
        g.backward_graph.replay();
        // Clones: the static gradients are overwritten by the next replay.
        std::vector<Tensor> result;
        for (const Tensor& grad : g.static_grad_inputs) result.push_back(grad.defined() ? grad.clone() : Tensor());
        return result;
      });
}

// A module that calls a graphed callable of one input and one output (the single-callable
// API's result, and GraphedCallable::module()).
class GraphedModule final : public nn::Module {
 public:
  explicit GraphedModule(std::shared_ptr<GraphedCallable::State> state)
      : nn::Module("Graphed"), state_(std::move(state)) {
    if (state_->callable.module) register_module("module", state_->callable.module);
  }

  Tensor forward(const Tensor& input) override {
    const GraphedCallable::State& s = *state_;
    EMBER_CHECK(s.num_inputs == 1 && s.static_outputs.size() == 1, ValueError,
                "make_graphed_callables: the graphed module's forward takes one tensor and returns one, but the "
                "callable takes ",
                s.num_inputs, " and returns ", s.static_outputs.size(), ": call the GraphedCallable instead");
    return GraphedCallable(state_)({input}).at(0);
  }

 private:
  std::shared_ptr<GraphedCallable::State> state_;
};

void check_callable(const GraphCallable& callable, const std::vector<Tensor>& sample_args) {
  EMBER_CHECK(callable.function != nullptr, ValueError, "make_graphed_callables: a callable is empty");
  if (callable.module) {
    for (const Tensor& b : callable.module->buffers())
      EMBER_CHECK(!b.requires_grad(), ValueError,
                  "In any :class:`~torch.nn.Module` passed to :func:`~make_graphed_callables`, only parameters may "
                  "be trainable. All buffers must have ``requires_grad=False``.");
  }
  for (const Tensor& sample : sample_args)
    EMBER_CHECK(sample.defined() && sample.device().is_cuda(), ValueError,
                "make_graphed_callables: the sample input must be a defined CUDA tensor");
}

}  // namespace

std::vector<Tensor> GraphedCallable::operator()(const std::vector<Tensor>& inputs) const {
  const State& s = *state_;
  if (s.callable.module && s.callable.module->is_training() != s.training) return s.callable.function(inputs);
  return replay(state_, inputs);
}

std::shared_ptr<nn::Module> GraphedCallable::module() const { return std::make_shared<GraphedModule>(state_); }

std::vector<GraphedCallable> make_graphed_callables(std::vector<GraphCallable> callables,
                                                    const std::vector<std::vector<Tensor>>& sample_args,
                                                    int num_warmup_iters, bool allow_unused_input, MempoolId pool) {
  EMBER_CHECK(!(is_autocast_enabled(kCUDA) && is_autocast_cache_enabled()), Error,
              "make_graphed_callables does not support the autocast caching. Please set `cache_enabled=False`.");
  EMBER_CHECK(!callables.empty() && callables.size() == sample_args.size(), ValueError,
              "make_graphed_callables: ", callables.size(), " callables but ", sample_args.size(),
              " sample_args (one tuple of sample tensors per callable)");
  EMBER_CHECK(num_warmup_iters >= 0, ValueError, "make_graphed_callables: num_warmup_iters must be >= 0, got ",
              num_warmup_iters);
  EMBER_CHECK(!is_current_stream_capturing(), CudaError,
              "make_graphed_callables does not support being called during a capture");
  for (size_t i = 0; i < callables.size(); ++i) check_callable(callables[i], sample_args[i]);

  std::vector<std::shared_ptr<GraphedCallable::State>> states;
  int device = current_device();
  for (size_t i = 0; i < callables.size(); ++i) {
    auto s = std::make_shared<GraphedCallable::State>(std::move(callables[i]));
    s->training = s->callable.module ? s->callable.module->is_training() : true;
    s->surface = sample_args[i];
    s->num_inputs = sample_args[i].size();
    if (s->callable.module) {
      std::vector<Tensor> params = s->callable.module->parameters();
      s->surface.insert(s->surface.end(), params.begin(), params.end());
    }
    if (!sample_args[i].empty()) device = sample_args[i][0].device().index();
    states.push_back(std::move(s));
  }
  const MempoolId mempool = pool.empty() ? graph_pool_handle() : pool;
  DeviceGuard device_guard(device);
  Stream side(device);
  synchronize();
  {
    StreamGuard guard(side);
    for (auto& s : states) {
      for (int i = 0; i < num_warmup_iters; ++i) {
        std::vector<Tensor> outputs = requiring_grad(s->callable.function(s->static_inputs()));
        if (outputs.empty()) continue;
        std::vector<Tensor> grad_outputs;
        for (const Tensor& o : outputs) grad_outputs.push_back(zeros_like(o));
        (void)autograd::grad(outputs, requiring_grad(s->surface), grad_outputs, std::nullopt, false,
                             allow_unused_input);
      }
    }
  }
  synchronize();
  for (auto& s : states) {
    graph capture(s->forward_graph, mempool, side);
    s->static_outputs = s->callable.function(s->static_inputs());
  }
  for (auto it = states.rbegin(); it != states.rend(); ++it) {
    GraphedCallable::State& s = **it;
    for (const Tensor& o : s.static_outputs)
      s.static_grad_outputs.push_back(o.requires_grad() ? zeros_like(o) : Tensor());
    std::vector<Tensor> outputs = requiring_grad(s.static_outputs);
    std::vector<Tensor> inputs = requiring_grad(s.surface);
    s.static_grad_inputs.assign(s.surface.size(), Tensor());
    if (outputs.empty() || inputs.empty()) continue;
    std::vector<Tensor> grad_outputs;
    for (const Tensor& g : s.static_grad_outputs)
      if (g.defined()) grad_outputs.push_back(g);
    std::vector<Tensor> grads;
    {
      graph capture(s.backward_graph, mempool, side);
      grads = autograd::grad(outputs, inputs, grad_outputs, std::nullopt, false, allow_unused_input);
    }
    s.has_backward = true;
    size_t next = 0;
    for (size_t k = 0; k < s.surface.size(); ++k)
      if (s.surface[k].requires_grad()) s.static_grad_inputs[k] = grads[next++];
  }
  std::vector<GraphedCallable> result;
  for (auto& s : states) result.emplace_back(std::move(s));
  return result;
}

std::shared_ptr<nn::Module> make_graphed_callables(std::shared_ptr<nn::Module> module,
                                                   const std::vector<Tensor>& sample_args, int num_warmup_iters) {
  EMBER_CHECK(module != nullptr, ValueError, "make_graphed_callables: the module is null");
  EMBER_CHECK(sample_args.size() == 1, ValueError,
              "make_graphed_callables: a module takes one input, so sample_args must hold one tensor, got ",
              sample_args.size());
  // The sample is copied: the static input is the graph's, not the caller's tensor.
  const Tensor& sample = sample_args[0];
  check_callable(GraphCallable(module), sample_args);
  Tensor static_input = sample.detach().clone().requires_grad_(sample.requires_grad());
  auto graphed = make_graphed_callables({GraphCallable(module)}, {{static_input}}, num_warmup_iters,
                                        /*allow_unused_input=*/true);
  return graphed.at(0).module();
}

}  // namespace ember::cuda
