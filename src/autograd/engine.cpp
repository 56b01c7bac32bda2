// The engine: dependency counting, a ready queue ordered by sequence number, and the
// stream rules of the spec's backward passes.
//
// Note [Streaming backwards]
// The rules of api-training.md, and where each lives:
//  1. A node runs under a StreamGuard of the stream that was current on its device when
//     its forward op ran (InputMetadata::stream; `call_node` below). Custom Functions
//     see it as current_stream().
//  2. Gradients crossing streams are joined by events only (Note [Producer-consumer
//     stream syncs] in input_buffer.h).
//  3. When the pass ends, the caller's current stream on every device the pass queued
//     work on waits for each such stream (`finish` below): reading a .grad on the stream
//     that called backward is safe.
//  4. Initial gradients are produced, as far as the engine knows, on the caller's
//     current stream when backward is called: the root's consumer waits for that
//     stream, so populating them and calling backward follow ordinary stream rules.
//  5. A leaf's AccumulateGrad is made when an op first uses the leaf and keeps that
//     op's current stream (gradient_edge in autograd_meta.cpp).
// Nodes run on the calling thread, in order of decreasing sequence number among the
// ready ones; their kernels run asynchronously on their streams.
#include "autograd/engine.h"

#include <algorithm>
#include <unordered_set>

#include "autograd/accumulate_grad.h"
#include "autograd/autograd_meta.h"
#include "autograd/formula_node.h"
#include "autograd/graph_task.h"
#include "core/tensor_impl.h"
#include "ember/cuda.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"
#include "ops/autocast.h"
#include "ops/launch.h"

namespace ember::autograd {

using ember::detail::IntListPrinter;

namespace {

thread_local std::vector<GraphTask*> current_tasks;

struct ReadyTask {
  std::shared_ptr<Node> node;
  InputBuffer buffer;
};
bool later_first(const ReadyTask& a, const ReadyTask& b) { return a.node->sequence_nr() < b.node->sequence_nr(); }

void note_used(GraphTask& task, const std::optional<cuda::Stream>& s) {
  if (s && std::find(task.used_streams.begin(), task.used_streams.end(), *s) == task.used_streams.end()) {
    task.used_streams.push_back(*s);
  }
}

std::optional<cuda::Stream> current_stream_of(const Tensor& t) {
  if (!t.is_cuda()) return std::nullopt;
  return cuda::current_stream(t.get_device());
}

void check_root_grads(const BackwardRequest& r, std::vector<Tensor>& grads) {
  grads.resize(r.roots.size());
  EMBER_CHECK(r.root_grads.empty() || r.root_grads.size() == r.roots.size(), ValueError, "got ", r.root_grads.size(),
              " gradients for ", r.roots.size(), " tensors");
  for (size_t i = 0; i < r.roots.size(); ++i) {
    const Tensor& out = r.roots[i];
    EMBER_CHECK(out.defined(), ValueError, "element ", i, " of tensors is undefined");
    EMBER_CHECK(out.requires_grad(), Error, "element ", i,
                " of tensors does not require grad and does not have a grad_fn");
    Tensor g = r.root_grads.empty() ? Tensor() : r.root_grads[i];
    if (!g.defined()) {
      EMBER_CHECK(out.numel() == 1, Error, "grad can be implicitly created only for scalar outputs");
      grads[i] = ones_like(out);
      continue;
    }
    EMBER_CHECK(g.sizes() == out.sizes(), ValueError, "Mismatch in shape: grad_output[", i, "] has a shape of ",
                IntListPrinter{g.sizes()}, " and output[", i, "] has a shape of ", IntListPrinter{out.sizes()}, ".");
    // Another real dtype is cast when the root's node receives it (validate); as PyTorch,
    // only a complex gradient of a real output (or the reverse) is refused.
    EMBER_CHECK(is_complex(g.dtype()) == is_complex(out.dtype()), ValueError,
                "For complex Tensors, both grad_output and output are required to have the same dtype. Mismatch in "
                "dtype: grad_output[",
                i, "] has a dtype of ", dtype_name(g.dtype()), " and output[", i, "] has a dtype of ",
                dtype_name(out.dtype()), ".");
    EMBER_CHECK(g.device() == out.device(), ValueError, "Mismatch in device: grad_output[", i, "] is on ", g.device(),
                " and output[", i, "] is on ", out.device(), ".");
    grads[i] = g;
  }
}

void compute_dependencies(GraphTask& task, const std::vector<Edge>& roots) {
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  auto visit = [&](const Edge& e) {
    if (!e.is_valid()) return;
    ++task.dependencies[e.function.get()];
    if (seen.insert(e.function.get()).second) stack.push_back(e.function.get());
  };
  for (const Edge& e : roots) visit(e);
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) visit(e);
  }
}

// Marks the nodes from which a target (a node that runs or is captured) is reachable
// (post-order, iteratively).
void compute_needed(GraphTask& task, const std::vector<Edge>& roots) {
  std::unordered_set<Node*> done;
  std::vector<std::pair<Node*, size_t>> stack;
  for (const Edge& root : roots) {
    if (!root.is_valid() || done.count(root.function.get())) continue;
    stack.emplace_back(root.function.get(), 0);
    done.insert(root.function.get());
    while (!stack.empty()) {
      auto& [node, child] = stack.back();
      const auto& edges = node->next_edges();
      if (child < edges.size()) {
        Node* next = edges[child++].function.get();
        if (next != nullptr && done.insert(next).second) stack.emplace_back(next, 0);
        continue;
      }
      bool needed = task.exec_info[node].needed;
      for (const Edge& e : edges) {
        if (e.is_valid()) {
          auto it = task.exec_info.find(e.function.get());
          needed = needed || (it != task.exec_info.end() && (it->second.needed || !it->second.captures.empty()));
        }
      }
      task.exec_info[node].needed = needed;
      stack.pop_back();
    }
  }
}

// Note [Gradient validation]: a node's output i must fit input `input_nr` of the next
// node: a broadcast shape is summed down, another dtype is cast (a complex gradient of a
// real input keeps its real part); another shape or device is an error.
Tensor validate(const Node& node, size_t i, Tensor grad, const InputMetadata& expected) {
  if (grad.sizes() != expected.shape) {
    IntList out;
    bool expandable = true;
    try {
      out = ember::detail::broadcast_shapes(expected.shape, grad.sizes());
    } catch (const Error&) {
      expandable = false;
    }
    EMBER_CHECK(expandable && out == grad.sizes(), Error, "Function ", node.name(),
                " returned an invalid gradient at index ", i, " - got ", IntListPrinter{grad.sizes()},
                " but expected shape compatible with ", IntListPrinter{expected.shape});
    grad = detail::sum_to(grad, expected.shape);
  }
  EMBER_CHECK(grad.device() == expected.device, Error, "Function ", node.name(),
              " returned an invalid gradient at index ", i, " - expected device ", expected.device, " but got ",
              grad.device());
  if (grad.dtype() != expected.dtype) grad = grad.to(expected.dtype);
  return grad;
}

// Tensor hooks and retain_grad() of the outputs this node is the grad_fn of.
void run_tensor_hooks(Node& node, std::vector<Tensor>& inputs) {
  auto& in = node.internals();
  std::map<uint32_t, std::vector<std::pair<unsigned, TensorHook>>> hooks;
  std::map<uint32_t, std::weak_ptr<ember::detail::TensorImpl>> retained;
  {
    std::lock_guard<std::mutex> lock(in.mutex);
    if (in.tensor_hooks.empty() && in.retained.empty()) return;
    hooks = in.tensor_hooks;
    retained = in.retained;
  }
  for (auto& [pos, list] : hooks) {
    for (auto& [handle, hook] : list) {
      if (!inputs.at(pos).defined()) continue;
      inputs[pos] = hook_result(handle, inputs[pos], hook(inputs[pos]));
    }
  }
  for (auto& [pos, weak] : retained) {
    auto impl = weak.lock();
    if (!impl || !inputs.at(pos).defined()) continue;
    Tensor variable(impl);
    AutogradMeta& meta = materialize_meta(variable);
    std::lock_guard<std::mutex> lock(meta.mutex_);
    if (meta.grad_.defined()) check_assigned_grad(meta.grad_, variable);
    meta.grad_ = meta.grad_.defined() ? meta.grad_ + inputs[pos] : inputs[pos].clone();
  }
}

std::vector<Tensor> call_node(GraphTask& task, Node& node, std::vector<Tensor> inputs) {
  std::optional<cuda::Stream> stream = node_stream(node);
  std::optional<cuda::StreamGuard> guard;
  if (stream) guard.emplace(*stream);
  note_used(task, stream);
  std::vector<Tensor> outputs;
  {
    // Backward ops run in the dtypes the forward chose, never autocast (Note [Autocast]).
    const ember::detail::AutocastSuspend no_autocast;
    std::lock_guard<std::mutex> lock(node.internals().mutex);
    outputs = node.apply(std::move(inputs));
    if (!task.keep_graph) node.release_variables();
  }
  EMBER_CHECK(outputs.size() == node.next_edges().size() || node.next_edges().empty(), Error, "Function ", node.name(),
              " returned an incorrect number of gradients (expected ", node.next_edges().size(), ", got ",
              outputs.size(), ")");
  return outputs;
}

void push_ready(std::vector<ReadyTask>& ready, std::shared_ptr<Node> node, InputBuffer buffer) {
  ready.push_back({std::move(node), std::move(buffer)});
  std::push_heap(ready.begin(), ready.end(), later_first);
}

// Hands `grad` to input `input_nr` of `next`, queueing `next` once all its inputs are in.
void deliver(GraphTask& task, std::vector<ReadyTask>& ready, const Edge& edge, Tensor grad,
             const std::optional<cuda::Stream>& producer) {
  Node* next = edge.function.get();
  if (!task.should_visit(next)) return;
  auto it = task.pending.find(next);
  if (it == task.pending.end()) it = task.pending.emplace(next, InputBuffer(next->num_inputs())).first;
  it->second.add(*next, edge.input_nr, std::move(grad), producer, task.used_streams);
  if (--task.dependencies[next] == 0) {
    InputBuffer buffer = std::move(it->second);
    task.pending.erase(it);
    push_ready(ready, edge.function, std::move(buffer));
  }
}

void execute(GraphTask& task, std::vector<ReadyTask>& ready) {
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), later_first);
    ReadyTask item = std::move(ready.back());
    ready.pop_back();
    Node& node = *item.node;
    std::vector<Tensor> inputs = item.buffer.take(node);
    run_tensor_hooks(node, inputs);
    if (!task.exec_info.empty()) {
      auto it = task.exec_info.find(&node);
      if (it != task.exec_info.end() && !it->second.captures.empty()) {
        if (auto* leaf = dynamic_cast<AccumulateGrad*>(&node); leaf != nullptr && inputs.at(0).defined()) {
          std::optional<cuda::Stream> stream = node_stream(node);
          std::optional<cuda::StreamGuard> guard;
          if (stream) guard.emplace(*stream);
          note_used(task, stream);
          inputs[0] = leaf->run_hooks(std::move(inputs[0]));
        }
        for (const auto& c : it->second.captures) task.captured[c.index] = inputs.at(c.input_nr);
      }
      if (!task.should_run(&node)) continue;
    }
    std::optional<cuda::Stream> producer = node_stream(node);
    std::vector<Tensor> outputs = call_node(task, node, std::move(inputs));
    const auto& edges = node.next_edges();
    for (size_t i = 0; i < outputs.size() && i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.is_valid()) continue;
      Tensor g = outputs[i];
      if (g.defined()) {
        // On the node's stream, as PyTorch validates outputs under the node's stream guard:
        // summing a broadcast gradient down reads what the node wrote there.
        std::optional<cuda::StreamGuard> guard;
        if (producer) guard.emplace(*producer);
        g = validate(node, i, std::move(g), e.function->internals().inputs.at(e.input_nr));
      }
      deliver(task, ready, e, std::move(g), producer);
    }
  }
}

// Rule 3: the caller's current streams wait for every stream the pass used.
void finish(GraphTask& task) {
  for (const cuda::Stream& used : task.used_streams) {
    sync_streams(cuda::current_stream(used.device_index()), used);
  }
}

}  // namespace

std::vector<Tensor> run_backward(const BackwardRequest& r) {
  std::vector<Tensor> grads;
  check_root_grads(r, grads);
  GraphTask task(r.keep_graph, r.create_graph);
  std::vector<Edge> roots;
  roots.reserve(r.roots.size());
  for (const Tensor& t : r.roots) roots.push_back(gradient_edge(t));
  compute_dependencies(task, roots);

  std::vector<Edge> targets;
  if (!r.inputs.empty()) {
    task.captured.resize(r.inputs.size());
    for (size_t i = 0; i < r.inputs.size(); ++i) {
      const Tensor& in = r.inputs[i];
      EMBER_CHECK(in.defined() && in.requires_grad(), Error, "One of the differentiated Tensors does not require grad");
      Edge e = gradient_edge(in);
      targets.push_back(e);
      bool leaf = in.is_leaf();
      auto& info = task.exec_info[e.function.get()];
      if (r.accumulate && leaf) {
        info.needed = true;  // its AccumulateGrad runs
      } else {
        info.captures.push_back({e.input_nr, i});
      }
    }
    compute_needed(task, roots);
  }

  AutoGradMode mode(r.create_graph);
  task.callbacks.clear();
  current_tasks.push_back(&task);
  struct Pop {
    ~Pop() { current_tasks.pop_back(); }
  } pop;

  std::vector<ReadyTask> ready;
  for (size_t i = 0; i < roots.size(); ++i) {
    if (!roots[i].is_valid()) continue;
    Tensor g = validate(*roots[i].function, i, grads[i], roots[i].function->internals().inputs.at(roots[i].input_nr));
    deliver(task, ready, roots[i], std::move(g), current_stream_of(grads[i]));  // rule 4
  }
  execute(task, ready);
  finish(task);

  // queue_callback: after the last node, on the caller's streams; a callback may queue more.
  for (size_t i = 0;; ++i) {
    std::function<void()> cb;
    {
      std::lock_guard<std::mutex> lock(task.callbacks_mutex);
      if (i >= task.callbacks.size()) break;
      cb = task.callbacks[i];
    }
    cb();
  }

  if (!r.inputs.empty()) {
    for (size_t i = 0; i < r.inputs.size(); ++i) {
      Tensor& g = task.captured[i];
      if (r.accumulate) {
        if (r.inputs[i].is_leaf() || !g.defined()) continue;
        AutogradMeta& meta = materialize_meta(r.inputs[i]);
        meta.grad_ = meta.grad_.defined() ? meta.grad_ + g : g;
      } else {
        EMBER_CHECK(g.defined() || r.allow_unused, Error,
                    "One of the differentiated Tensors appears to not have been used in the graph. Set "
                    "allow_unused=True if this is the desired behavior.");
      }
    }
  }
  return r.accumulate ? std::vector<Tensor>{} : task.captured;
}

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
              std::optional<bool> retain_graph, bool create_graph, const std::vector<Tensor>& inputs) {
  BackwardRequest r;
  r.roots = tensors;
  r.root_grads = grad_tensors;
  r.keep_graph = retain_graph.value_or(create_graph);
  r.create_graph = create_graph;
  r.inputs = inputs;
  r.accumulate = true;
  run_backward(r);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph, bool create_graph,
                         bool allow_unused) {
  EMBER_CHECK(!inputs.empty(), ValueError, "grad requires non-empty inputs.");
  BackwardRequest r;
  r.roots = outputs;
  r.root_grads = grad_outputs;
  r.keep_graph = retain_graph.value_or(create_graph);
  r.create_graph = create_graph;
  r.inputs = inputs;
  r.accumulate = false;
  r.allow_unused = allow_unused;
  return run_backward(r);
}

void queue_callback(std::function<void()> callback) {
  EMBER_CHECK(!current_tasks.empty(), Error, "Final callbacks can only be installed during backward pass.");
  GraphTask& task = *current_tasks.back();
  std::lock_guard<std::mutex> lock(task.callbacks_mutex);
  task.callbacks.push_back(std::move(callback));
}

}  // namespace ember::autograd
