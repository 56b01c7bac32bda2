// make_graphed_callables: a module whose forward and backward replay captured graphs
// (torch.cuda.make_graphed_callables, for a module of one input).
//
// As PyTorch's graphs.py: warm-up passes on a side stream (lazy state: optimizer-free
// here, but the allocator's cache and any module buffers settle), then the forward graph
// is captured, then the backward graph into the forward's pool (autograd::grad of the
// static output w.r.t. the input, when it requires grad, and the parameters, with a
// static grad_output). The returned module routes its forward through a custom Function
// whose tensor arguments are the input and the parameters, so the backward's results
// reach the parameters' .grad through the ordinary accumulation.
#include <memory>

#include "ember/autograd.h"
#include "ember/cuda.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/nn/module.h"
#include "ember/tensor.h"

namespace ember::cuda {
namespace {

struct Graphed {
  std::shared_ptr<nn::Module> module;
  bool training = true;
  std::vector<Tensor> params;  // those requiring grad, in parameters() order
  bool input_requires_grad = false;
  Tensor static_input, static_output, static_grad_output;
  std::vector<Tensor> static_grads;  // [input's if it requires grad] + params'
  CUDAGraph forward_graph, backward_graph;
};

class GraphedModule final : public nn::Module {
 public:
  explicit GraphedModule(std::shared_ptr<Graphed> graphed) : nn::Module("Graphed"), graphed_(std::move(graphed)) {
    register_module("module", graphed_->module);
  }

  Tensor forward(const Tensor& input) override {
    Graphed& g = *graphed_;
    if (g.module->is_training() != g.training) return g.module->forward(input);
    EMBER_CHECK(input.sizes() == g.static_input.sizes() && input.dtype() == g.static_input.dtype() &&
                    input.device() == g.static_input.device(),
                ValueError, "make_graphed_callables: the input must have the sample's shape, dtype and device");
    // The backward graph computes the input's gradient only when the sample required one.
    EMBER_CHECK(!input.requires_grad() || g.input_requires_grad || !is_grad_enabled(), ValueError,
                "make_graphed_callables: the input requires_grad but the sample did not, so the captured backward "
                "computes no gradient for it (the requires_grad of the sample must match the real inputs')");
    std::vector<Tensor> args{input};
    args.insert(args.end(), g.params.begin(), g.params.end());
    std::shared_ptr<Graphed> keep = graphed_;
    std::vector<bool> is_tensor(args.size(), true);
    Tensor in = input;
    auto outputs = autograd::detail::apply_function(
        typeid(GraphedModule), args, std::move(is_tensor),
        [keep, in](autograd::AutogradContext*) -> std::vector<Tensor> {
          Graphed& s = *keep;
          if (!in.is_same(s.static_input)) s.static_input.copy_(in);
          s.forward_graph.replay();
          return {s.static_output.detach()};
        },
        [keep](autograd::AutogradContext*, std::vector<Tensor> grads) -> std::vector<Tensor> {
          Graphed& s = *keep;
          if (grads.at(0).defined()) s.static_grad_output.copy_(grads[0]);
          else s.static_grad_output.zero_();
          s.backward_graph.replay();
          // Clones: the static gradients are overwritten by the next replay.
          std::vector<Tensor> result;
          size_t next = 0;
          result.push_back(s.input_requires_grad ? s.static_grads[next++].clone() : Tensor());
          for (size_t i = 0; i < s.params.size(); ++i) result.push_back(s.static_grads[next++].clone());
          return result;
        });
    return outputs.at(0);
  }

 private:
  std::shared_ptr<Graphed> graphed_;
};

}  // namespace

std::shared_ptr<nn::Module> make_graphed_callables(std::shared_ptr<nn::Module> module,
                                                   const std::vector<Tensor>& sample_args, int num_warmup_iters) {
  EMBER_CHECK(module != nullptr, ValueError, "make_graphed_callables: the module is null");
  EMBER_CHECK(sample_args.size() == 1, ValueError,
              "make_graphed_callables: a module takes one input, so sample_args must hold one tensor, got ",
              sample_args.size());
  const Tensor& sample = sample_args[0];
  EMBER_CHECK(sample.defined() && sample.device().is_cuda(), ValueError,
              "make_graphed_callables: the sample input must be a defined CUDA tensor");
  EMBER_CHECK(num_warmup_iters >= 0, ValueError, "make_graphed_callables: num_warmup_iters must be >= 0, got ",
              num_warmup_iters);
  EMBER_CHECK(!is_current_stream_capturing(), CudaError,
              "make_graphed_callables does not support being called during a capture");
  auto g = std::make_shared<Graphed>();
  g->module = module;
  g->training = module->is_training();
  for (const Tensor& p : module->parameters())
    if (p.requires_grad()) g->params.push_back(p);
  g->input_requires_grad = sample.requires_grad();
  g->static_input = sample.detach().clone().requires_grad_(g->input_requires_grad);
  std::vector<Tensor> grad_targets;
  if (g->input_requires_grad) grad_targets.push_back(g->static_input);
  grad_targets.insert(grad_targets.end(), g->params.begin(), g->params.end());

  const int device = sample.device().index();
  Stream side(device);
  side.wait_stream(current_stream(device));
  {
    StreamGuard guard(side);
    for (int i = 0; i < num_warmup_iters; ++i) {
      Tensor out = module->forward(g->static_input);
      if (out.requires_grad() && !grad_targets.empty())
        (void)autograd::grad({out}, grad_targets, {ones_like(out)}, std::nullopt, false, /*allow_unused=*/true);
    }
  }
  current_stream(device).wait_stream(side);
  {
    graph capture(g->forward_graph, {}, side);
    g->static_output = module->forward(g->static_input);
  }
  EMBER_CHECK(g->static_output.requires_grad() || grad_targets.empty(), ValueError,
              "make_graphed_callables: the module's output does not require grad");
  g->static_grad_output = zeros_like(g->static_output);
  if (!grad_targets.empty()) {
    graph capture(g->backward_graph, g->forward_graph.pool(), side);
    std::vector<Tensor> grads = autograd::grad({g->static_output}, grad_targets, {g->static_grad_output},
                                               std::nullopt, false, /*allow_unused=*/true);
    for (size_t i = 0; i < grads.size(); ++i)
      g->static_grads.push_back(grads[i].defined() ? grads[i] : zeros_like(grad_targets[i]));
  }
  return std::make_shared<GraphedModule>(std::move(g));
}

}  // namespace ember::cuda
