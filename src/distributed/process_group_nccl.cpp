// The "nccl" backend: NCCL collectives on tensors of the driver backend.
//
// As ProcessGroupNCCL (see Note [Collective ordering] in distributed/process_group.h):
// each collective runs on the group's side stream of the tensors' device, which first
// waits for an event recorded on the current stream; the Work records an end event on
// the side stream and wait() makes the current stream wait for it (the host does not
// block). The tensors are recorded on the side stream (record_stream), so the caching
// allocator does not reuse their memory before NCCL is done with it.
//
// The communicator is made at the first collective, on that collective's device (one
// device per process, as DDP uses it), from the unique id rank 0 puts in the store.
// all_gather and reduce_scatter over lists are NCCL broadcasts / reduces in one NCCL
// group (no staging buffer); bool reduces as uint8 with MAX for SUM (logical or).
// Unlike the gloo backend, argument records are not exchanged (that would cost a host
// round trip per collective). A collective that does not finish within the group's
// timeout (a dead or diverging peer) is caught by a watchdog thread, as ProcessGroupNCCL's:
// it aborts the communicator (ncclCommAbort, so the stuck kernels return) and fails that
// Work and every other with a DistributedError; later collectives on the group fail at once.
// NCCL itself is the driver backend's (backends/cuda/nccl_communicator.h, the only header of
// the backends this layer includes).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/nccl_communicator.h"
#include "distributed/collective_checks.h"
#include "distributed/collective_watchdog.h"
#include "distributed/process_group.h"
#include "ember/cuda.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/stream.h"
#include "runtime/backend.h"
#include "runtime/stream_state.h"

namespace ember::detail::distributed {
namespace {

nccl::Reduction nccl_op(ReduceOp op, DType dtype, const char* collective) {
  EMBER_CHECK(!is_complex(dtype) || op == ReduceOp::SUM || op == ReduceOp::AVG, ValueError, collective,
              " does not support ", ember::distributed::reduce_op_name(op), " on complex tensors");
  if (dtype == DType::Bool) {
    return op == ReduceOp::SUM || op == ReduceOp::MAX ? nccl::Reduction::Max : nccl::Reduction::Min;
  }
  switch (op) {
    case ReduceOp::SUM: return nccl::Reduction::Sum;
    case ReduceOp::AVG: return nccl::Reduction::Avg;
    case ReduceOp::PRODUCT: return nccl::Reduction::Product;
    case ReduceOp::MIN: return nccl::Reduction::Min;
    case ReduceOp::MAX: return nccl::Reduction::Max;
  }
  return nccl::Reduction::Sum;
}

/// Completes on the side stream; wait() orders the caller's current stream after it, or
/// throws the watchdog's error.
class NcclWork final : public Work {
 public:
  NcclWork(std::vector<Tensor> tensors, cuda::Event end, int device)
      : Work(std::move(tensors)), end_(std::move(end)), device_(device) {}
  bool is_completed() override { return failed_ || end_.query(); }
  void wait() override {
    if (auto error = exception()) std::rethrow_exception(error);
    cuda::current_stream(device_).wait_event(end_);
  }
  /// For the watchdog: whether the side stream passed the end event; failing the work.
  bool end_reached() { return end_.query(); }
  void fail(const std::exception_ptr& error) {
    set_exception(error);
    failed_ = true;
  }

 private:
  cuda::Event end_;
  int device_;
  std::atomic<bool> failed_{false};
};

class NcclGroup final : public ProcessGroup {
 public:
  explicit NcclGroup(const GroupSetup& setup) : ProcessGroup(setup.rank, setup.world_size), setup_(setup) {
    Backend* cuda = backend_or_null();
    EMBER_CHECK(cuda && std::string(cuda->name()) == "driver", DistributedError,
                "init_process_group: the nccl backend needs the CUDA driver backend (a GPU); this process has ",
                cuda ? cuda->name() : "no cuda", " devices: use the gloo backend");
    std::string key = setup.prefix + "nccl/unique_id";
    if (setup.rank == 0) {
      id_ = nccl::make_unique_id();
      setup.store->set(key, std::string(id_.data(), id_.size()));
    } else {
      std::string bytes = setup.store->get(key);
      EMBER_CHECK(bytes.size() == sizeof(id_), DistributedError, "init_process_group: a malformed NCCL unique id");
      std::copy(bytes.begin(), bytes.end(), id_.begin());
    }
  }

  ~NcclGroup() override {
    watchdog_.reset();  // no abort after this: the communicator is destroyed next
    comm_.reset();
  }

  const char* backend_name() const noexcept override { return "nccl"; }

  std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op, bool) override {
    check_tensors("all_reduce", {tensor});
    nccl::check_dtype(tensor.dtype(), "all_reduce");
    auto red = nccl_op(op, tensor.dtype(), "all_reduce");
    return run("all_reduce", {tensor}, [&](nccl::Communicator& comm, BackendStream* stream) {
      comm.all_reduce(tensor.data_ptr(), count(tensor), tensor.dtype(), red, stream, "all_reduce");
    });
  }

  std::shared_ptr<Work> broadcast(const Tensor& tensor, int root, bool) override {
    check_tensors("broadcast", {tensor});
    EMBER_CHECK(root >= 0 && root < world_size(), ValueError, "broadcast: invalid root rank ", root, " for a world of ",
                world_size(), " ranks");
    nccl::check_dtype(tensor.dtype(), "broadcast");
    return run("broadcast", {tensor}, [&](nccl::Communicator& comm, BackendStream* stream) {
      comm.broadcast(tensor.data_ptr(), tensor.data_ptr(), count(tensor), tensor.dtype(), root, stream, "broadcast");
    });
  }

  std::shared_ptr<Work> all_gather(const std::vector<Tensor>& outputs, const Tensor& input, bool) override {
    std::vector<Tensor> tensors(outputs);
    tensors.push_back(input);
    check_list("all_gather", "output", outputs, input, world_size());
    check_tensors("all_gather", tensors);
    nccl::check_dtype(input.dtype(), "all_gather");
    return run("all_gather", tensors, [&](nccl::Communicator& comm, BackendStream* stream) {
      comm.group_start("all_gather");
      for (int r = 0; r < world_size(); ++r) {
        const void* send = r == rank() ? input.data_ptr() : outputs[r].data_ptr();
        comm.broadcast(send, outputs[r].data_ptr(), count(input), input.dtype(), r, stream, "all_gather");
      }
      comm.group_end("all_gather");
    });
  }

  std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                                       bool) override {
    std::vector<Tensor> tensors(inputs);
    tensors.push_back(output);
    check_list("reduce_scatter", "input", inputs, output, world_size());
    check_tensors("reduce_scatter", tensors);
    nccl::check_dtype(output.dtype(), "reduce_scatter");
    auto red = nccl_op(op, output.dtype(), "reduce_scatter");
    return run("reduce_scatter", tensors, [&](nccl::Communicator& comm, BackendStream* stream) {
      comm.group_start("reduce_scatter");
      for (int r = 0; r < world_size(); ++r) {
        void* receive = r == rank() ? output.data_ptr() : nullptr;
        comm.reduce(inputs[r].data_ptr(), receive, count(output), output.dtype(), red, r, stream, "reduce_scatter");
      }
      comm.group_end("reduce_scatter");
    });
  }

  std::shared_ptr<Work> barrier(bool) override {
    // As ProcessGroupNCCL: an all_reduce of one element on this rank's device.
    int device = device_ >= 0 ? device_ : cuda::current_device();
    Tensor one = ember::zeros({1}, TensorOptions().device(Device(DeviceType::CUDA, device)));
    return all_reduce(one, ReduceOp::SUM, false);
  }

 private:
  static size_t count(const Tensor& t) { return static_cast<size_t>(t.numel()); }

  void check_tensors(const char* op, const std::vector<Tensor>& tensors) const {
    for (const Tensor& t : tensors) {
      EMBER_CHECK(t.defined(), ValueError, op, ": expected a defined tensor");
      EMBER_CHECK(t.is_cuda(), DeviceError, op, ": the nccl backend serves cuda tensors, got a tensor on ", t.device());
      // As ProcessGroupNCCL (the gloo backend stages them instead, Note [Strided tensors in collectives]).
      EMBER_CHECK(t.is_contiguous(), ValueError, op, ": Tensors must be contiguous");
      EMBER_CHECK(t.device() == tensors.front().device(), DeviceError, op,
                  ": Expected all tensors to be on the same device, but found at least two devices, ",
                  tensors.front().device(), " and ", t.device(), "!");
    }
  }

  template <typename Enqueue>
  std::shared_ptr<Work> run(const char* op, const std::vector<Tensor>& tensors, Enqueue&& enqueue) {
    std::lock_guard lock(mutex_);
    if (watchdog_) {
      std::string failure = watchdog_->failure();
      EMBER_CHECK(failure.empty(), DistributedError, op, ": the process group failed earlier: ", failure);
    }
    int device = tensors.front().get_device();
    ensure_communicator(device);
    cuda::Stream current = cuda::current_stream(device);
    cuda::Event ready;
    ready.record(current);
    side_->wait_event(ready);
    {
      // The watchdog's abort runs on its own thread: never while NCCL is enqueueing on the
      // same communicator, and nothing is enqueued on an aborted one.
      std::lock_guard comm_lock(comm_mutex_);
      EMBER_CHECK(!aborted_, DistributedError, op, ": the process group failed earlier: ", watchdog_->failure());
      enqueue(*comm_, side_->state()->native());
    }
    for (const Tensor& t : tensors) t.record_stream(*side_);
    cuda::Event end;
    end.record(*side_);
    auto work = std::make_shared<NcclWork>(tensors, std::move(end), device);
    // Captured (a DDP step captured whole): NCCL's kernels are nodes of the graph and its
    // events the capture's, which no query may ask about; as ProcessGroupNCCL, the watchdog
    // does not watch a captured collective (its replays are the graph's work).
    if (backend().capture_status(current.state()->native()).first != CaptureStatus::None) return work;
    watchdog_->watch(
        ++sequence_, op, [work] { return work->end_reached(); },
        [work](const std::exception_ptr& error) { work->fail(error); });
    return work;
  }

  void ensure_communicator(int device) {
    if (comm_) {
      EMBER_CHECK(device == device_, DeviceError, "the nccl process group's communicator is on cuda:", device_,
                  "; a collective on cuda:", device, " needs a process group of its own");
      return;
    }
    wait_for_peers();
    comm_ = std::make_unique<nccl::Communicator>(id_, world_size(), rank(), device);
    device_ = device;
    side_.emplace(device);
    watchdog_.emplace(rank(), setup_.timeout, [this](const std::string&) {
      aborted_ = true;  // no enqueue starts after this
      // An enqueue in progress can itself be blocked behind the stuck collective (a full
      // launch queue, a connection being set up): after a bounded wait the abort goes ahead,
      // since it is what unblocks that enqueue.
      std::unique_lock comm_lock(comm_mutex_, std::defer_lock);
      (void)comm_lock.try_lock_for(std::chrono::seconds(5));
      comm_->abort();  // the stuck kernels return; the communicator is gone
    });
  }

  /// ncclCommInitRank blocks, with no timeout, until every rank has called it, and the
  /// watchdog has no communicator to abort before it returns. So each rank first announces
  /// its first collective in the store and waits (within the group's timeout) for all the
  /// others': a rank that never gets there is a DistributedError naming it, not a hang.
  void wait_for_peers() {
    const std::string base = setup_.prefix + "nccl/communicator/";
    setup_.store->set(base + std::to_string(rank()), "");
    std::vector<std::string> keys;
    for (int r = 0; r < world_size(); ++r) keys.push_back(base + std::to_string(r));
    try {
      setup_.store->wait(keys, setup_.timeout);
    } catch (const DistributedError&) {
      std::string missing;
      for (int r = 0; r < world_size(); ++r) {
        if (!setup_.store->check({keys[static_cast<size_t>(r)]}))
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      fail<DistributedError>("init_process_group (ncclCommInitRank): rank ", rank(), " waited ", setup_.timeout.count(),
                             " ms for the first collective of rank(s) ", missing.empty() ? "?" : missing,
                             "; every rank must call the same collectives");
    }
  }

  GroupSetup setup_;
  nccl::UniqueId id_{};
  std::mutex mutex_;
  std::timed_mutex comm_mutex_;  // held while enqueueing on comm_ and (within a bound) while aborting it
  std::unique_ptr<nccl::Communicator> comm_;
  int device_ = -1;
  std::optional<cuda::Stream> side_;
  uint64_t sequence_ = 0;
  std::atomic<bool> aborted_{false};
  std::optional<CollectiveWatchdog> watchdog_;  // last: stopped first
};

}  // namespace

std::unique_ptr<ProcessGroup> make_nccl_group(const GroupSetup& setup) {
  nccl::require_built();
  return std::make_unique<NcclGroup>(setup);
}

}  // namespace ember::detail::distributed
