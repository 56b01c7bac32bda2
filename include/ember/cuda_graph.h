// ember::cuda CUDA Graphs: capture a stream's work once, replay it with one launch
// (torch.cuda.CUDAGraph, torch.cuda.graph, torch.cuda.graph_pool_handle).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/cuda_mem_pool.h"  // MempoolId
#include "ember/stream.h"

namespace ember {
class Generator;
class Tensor;
namespace detail {
struct GeneratorState;
}  // namespace detail
namespace nn {
class Module;
}  // namespace nn
}  // namespace ember

namespace ember::cuda {

/// A new pool id that graphs may share: pass it to capture_begin (or graph) of each, so
/// that they allocate from one private pool (torch.cuda.graph_pool_handle). Numbered with
/// MemPool's ids, as PyTorch's: a MemPool's id() may be passed the same way.
MempoolId graph_pool_handle();

/// True when the calling thread's current stream on the current device is capturing
/// (torch.cuda.is_current_stream_capturing). False when no cuda backend is usable.
bool is_current_stream_capturing();

/// A captured graph (torch.cuda.CUDAGraph). Neither copyable nor movable; the destructor resets.
class CUDAGraph {
 public:
  CUDAGraph();
  ~CUDAGraph();
  CUDAGraph(const CUDAGraph&) = delete;
  CUDAGraph& operator=(const CUDAGraph&) = delete;

  /// Registers a cuda generator's current state with this graph: random ops it captures
  /// that draw from that state (through `generator`, or any generator sharing the state,
  /// Generator::graphsafe_get_state) draw new numbers on each replay, as the default
  /// generator's do, and each replay advances the state's offset by what the capture drew.
  /// The default generator of the capture's device is registered by every capture_begin.
  /// CudaError while the current stream is capturing; DeviceError for a cpu generator.
  void register_generator_state(const Generator& generator);
  /// The same for a generator state (PyTorch's overload taking a CUDAGeneratorState).
  void register_generator_state(std::shared_ptr<detail::GeneratorState> state);
  /// Begins capturing the current stream (which must not be the default stream). Memory
  /// allocated by the capture comes from `pool` (a graph_pool_handle() or a MemPool's id(),
  /// shared with the graphs and pools that use it) or,
  /// when empty, from a private pool of this graph. `capture_error_mode` is "global",
  /// "thread_local" or "relaxed" (cudaStreamCaptureMode).
  void capture_begin(MempoolId pool = {}, const std::string& capture_error_mode = "global");
  /// Ends the capture on the stream it began on and instantiates the graph.
  void capture_end();
  /// Runs the captured work on the current stream, ordered like any other work.
  void replay();
  /// Releases the graph and its use of the memory pool; the graph may capture again.
  void reset();
  /// The memory pool of the captured graph (to share with later captures).
  MempoolId pool() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// with torch.cuda.graph(g): synchronizes the device, empties the cache, makes `stream`
/// (by default a side stream of the current device, one per device) current, and begins capturing
/// into `g`; the end of the scope ends the capture and restores the current stream.
/// Ending the capture may fail (work forked and never joined, an invalidated capture):
/// the destructor then throws CudaError, unless the scope is already unwinding from an
/// exception, in which case the capture is ended and the first exception wins.
class graph {
 public:
  explicit graph(CUDAGraph& cuda_graph, MempoolId pool = {}, std::optional<Stream> stream = std::nullopt,
                 const std::string& capture_error_mode = "global");
  ~graph() noexcept(false);
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;

 private:
  void restore() noexcept;

  CUDAGraph& graph_;
  int uncaught_;
  int previous_device_;
  std::optional<Stream> previous_stream_;
};

/// torch.cuda.make_graphed_callables for a module of one input: runs `num_warmup_iters`
/// forward and backward passes of `module` on `sample_args` (one tensor, of the shape and
/// dtype of every later input) on a side stream, then captures one forward and one
/// backward pass into two graphs that share a pool. The returned module's forward, while
/// its training mode is the one at capture, copies its input into the static input,
/// replays the forward graph and returns the static output (overwritten by the next call);
/// its backward replays the backward graph, so the parameters' .grad accumulate as
/// eagerly. In the other mode it runs `module`'s own forward.
std::shared_ptr<nn::Module> make_graphed_callables(std::shared_ptr<nn::Module> module,
                                                   const std::vector<Tensor>& sample_args, int num_warmup_iters = 3);

/// One callable for make_graphed_callables: a function of several tensors returning
/// several, and the module whose parameters it uses (their gradients flow through the
/// graphed backward; none for a plain function). A module converts to one: its
/// forward(const std::vector<Tensor>&) when it has one, else its forward of one tensor.
struct GraphCallable {
  using Function = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  GraphCallable(std::shared_ptr<nn::Module> module_, Function function_)
      : module(std::move(module_)), function(std::move(function_)) {}
  GraphCallable(Function function_) : function(std::move(function_)) {}  // NOLINT: as a Python callable
  template <typename M>
  requires std::is_base_of_v<nn::Module, M> GraphCallable(std::shared_ptr<M> m)  // NOLINT: as a Python module
      : module(m), function([m](const std::vector<Tensor>& inputs) -> std::vector<Tensor> {
          if constexpr (requires { m->forward(inputs); }) {
            auto out = m->forward(inputs);
            if constexpr (std::is_same_v<decltype(out), std::vector<Tensor>>) return out;
            else return {out};
          } else {
            return {m->forward(inputs.at(0))};
          }
        }) {}

  std::shared_ptr<nn::Module> module;
  Function function;
};

/// A graphed callable: calling it copies the inputs into the static inputs (unless they
/// are the static inputs), replays the forward graph and returns the static outputs (the
/// next call overwrites them), recorded so that backward replays the backward graph and
/// hands the inputs and the module's parameters their gradients. A module's callable, in
/// the other training mode than at capture, runs the module's own function instead.
class GraphedCallable {
 public:
  struct State;
  explicit GraphedCallable(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
  /// A module wrapping the callable's module (registered as its child) whose forward of
  /// one tensor calls this (ValueError for a callable of several inputs or outputs).
  std::shared_ptr<nn::Module> module() const;

 private:
  std::shared_ptr<State> state_;
};

/// torch.cuda.make_graphed_callables for several callables (in the order they run): each
/// takes the tensors of its sample_args entry (their requires_grad must be the real
/// inputs'). Warm-up runs each callable's forward and backward `num_warmup_iters` times on
/// a side stream; then each forward is captured in order and each backward in reverse
/// order, all into one memory pool (`pool`, by default a new one). allow_unused_input: an
/// input or parameter that does not reach the outputs gets a zero gradient instead of the
/// error. Errors as PyTorch's: a buffer that requires grad, the autocast cache enabled, a
/// sample that is not a cuda tensor, a call during a capture.
std::vector<GraphedCallable> make_graphed_callables(std::vector<GraphCallable> callables,
                                                    const std::vector<std::vector<Tensor>>& sample_args,
                                                    int num_warmup_iters = 3, bool allow_unused_input = false,
                                                    MempoolId pool = {});

}  // namespace ember::cuda
