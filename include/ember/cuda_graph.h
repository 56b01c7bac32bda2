// ember::cuda CUDA Graphs: capture a stream's work once, replay it with one launch
// (torch.cuda.CUDAGraph, torch.cuda.graph, torch.cuda.graph_pool_handle).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/cuda_mem_pool.h"  // MempoolId
#include "ember/stream.h"

namespace ember {
class Tensor;
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

}  // namespace ember::cuda
