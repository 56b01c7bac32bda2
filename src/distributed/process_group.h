// ProcessGroup: the interface every backend ("gloo", "nccl") implements.
//
// Note [Collective ordering]
// Ranks issue collectives in the same order; a group runs them in the order issued, one
// after another. On cuda tensors a collective is ordered on the calling thread's current
// stream of the tensors' device, as ProcessGroupNCCL's:
//   (A) it starts only after the work queued on that stream before the call has completed:
//       the group's own stream of the device (gloo: its host task, Note [Collectives as
//       stream work] in process_group_gloo.cpp; nccl: its side stream) waits for an event
//       recorded on the calling stream at the call;
//   (B) once waited on (Work::wait, or at once when async_op is false) later work on the
//       stream sees the result: the current stream waits for the end of the collective's
//       work on the group's stream (gloo: after the host has waited for the collective;
//       nccl: without blocking the host). Work on another stream must wait for that
//       stream, as after any kernel (the stream sanitizer reports it otherwise);
//   (C) until then the tensors belong to the collective: work queued on the stream
//       between the call and wait() must not touch them (as in PyTorch). The Work keeps
//       the tensors alive until it completes.
//
// Note [Collective checks]
// Before each collective the gloo group exchanges a fixed-size record per rank (the
// operation, reduce op, dtype, element count, root, sequence number, and any argument
// error this rank found). A mismatch, or a rank that rejected its arguments, becomes a
// DistributedError naming the operation and the peer on every rank at once, rather than
// a hang or a transport error that names no one. The exchange is one Gloo all-gather of
// fixed-size slots (src/distributed/record_exchange.h); a small all_reduce's data is
// gathered in the same slots and reduced only once the records agree.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ember/distributed.h"

namespace ember::detail::distributed {

using ember::distributed::ReduceOp;
using ember::distributed::Store;
using ember::distributed::Work;

/// What a backend is built from: the rank, the world, the store the ranks met in, the
/// timeout for every collective, and this host's address as the store connection sees it.
struct GroupSetup {
  std::shared_ptr<Store> store;
  std::string prefix;  // keys of this group in the store
  int rank = 0;
  int world_size = 1;
  std::chrono::milliseconds timeout{};
  std::string local_address;  // "" when unknown (file store): the loopback is used
  std::string store_host;     // who serves the store ("rank 0", "the launcher"), for messages; "" when unknown
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual const char* backend_name() const noexcept = 0;
  int rank() const noexcept { return rank_; }
  int world_size() const noexcept { return world_size_; }

  // Each returns the work of a collective issued in the order of the calls. Argument
  // errors are thrown on the calling rank (and reported to the others, see Note
  // [Collective checks]); failures during the collective come from Work::wait().
  // `async_op` false says the caller waits for the work at once: a backend may then run
  // it on the calling thread.
  virtual std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op, bool async_op) = 0;
  virtual std::shared_ptr<Work> broadcast(const Tensor& tensor, int root, bool async_op) = 0;
  virtual std::shared_ptr<Work> all_gather(const std::vector<Tensor>& outputs, const Tensor& input, bool async_op) = 0;
  virtual std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                                               bool async_op) = 0;
  virtual std::shared_ptr<Work> barrier(bool async_op) = 0;

 protected:
  ProcessGroup(int rank, int world_size) : rank_(rank), world_size_(world_size) {}

 private:
  int rank_;
  int world_size_;
};

/// The backends; "nccl" throws DistributedError in builds without CUDA.
std::unique_ptr<ProcessGroup> make_gloo_group(const GroupSetup& setup);
std::unique_ptr<ProcessGroup> make_nccl_group(const GroupSetup& setup);

}  // namespace ember::detail::distributed
