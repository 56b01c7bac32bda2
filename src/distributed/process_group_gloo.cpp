// The "gloo" backend: Gloo's TCP transport and algorithms on host memory (cpu tensors,
// and emulated cuda tensors, whose device memory is host memory). See Note [Collective
// ordering] and Note [Collective checks] in process_group.h.
//
// One worker thread per group runs the collectives in the order issued; a blocking call
// with nothing queued runs on the calling thread instead. Every collective starts with the
// record exchange (one Gloo all-gather of fixed-size slots, src/distributed/record_exchange.h).
// Gloo lacks AVG (ember sums, then divides) and a reduce_scatter over arbitrary inputs
// (ember all-reduces the concatenated inputs and keeps its own block). An all_reduce up to
// a few MiB is composed as ProcessGroupGloo composes its sparse all_reduce: the data is
// all-gathered (its first 64 KiB in the record exchange) and each rank reduces the copies
// locally in rank order (every rank computes the same result); a larger one runs
// gloo::allreduce (the ring) after the record exchange (Note [All-reduce paths]). After a
// transport failure the Gloo context is unusable: every later collective fails at once
// with the first error. Non-contiguous tensors take part through dense copies (Note
// [Strided tensors in collectives] in collective_checks.h). On emulated cuda tensors the
// collective runs as a host task on the group's stream of their device (Note
// [Collectives as stream work]).
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <thread>

#include "distributed/collective_checks.h"
#include "distributed/collective_record.h"
#include "distributed/gloo_rendezvous.h"
#include "distributed/host_work.h"
#include "distributed/peer_report.h"
#include "distributed/process_group.h"
#include "distributed/record_exchange.h"
#include "distributed/reduce_functions.h"
#include "distributed/socket.h"
#include "distributed/stream_work.h"
#include "ember/cuda.h"
#include "ember/errors.h"
#include "ember/stream.h"
#include "kernels/host_task.h"
#include "ops/launch.h"
#include "runtime/backend.h"
#include "runtime/stream_state.h"

namespace ember::detail::distributed {
namespace {

/// The device memory a collective reads and writes (its host task's operands, for cuda
/// tensors: Note [Collectives as stream work]).
struct Operands {
  std::vector<Tensor> reads;
  std::vector<Tensor> writes;
};

/// One collective as the worker runs it.
struct PendingOp {
  std::shared_ptr<HostWork> work;
  CollectiveRecord record;
  // cuda tensors: the calling stream's work before the call, the group's stream of the
  // device that runs the collective after it, and the collective's operands there.
  std::optional<cuda::Event> ready;
  std::optional<cuda::Stream> stream;
  int device = -1;
  OperandList reads, writes;
  Tensor payload;  // gathered with the record (all or the start of an all_reduce's data)
  std::function<void(const RecordExchange&)> run;  // after the records agree
};

/// `reads` and `writes` of a collective on cuda tensors; none for cpu tensors.
Operands cuda_operands(const std::vector<Tensor>& reads, const std::vector<Tensor>& writes) {
  const bool cuda = !writes.empty() && writes.front().defined() && writes.front().is_cuda();
  return cuda ? Operands{reads, writes} : Operands{};
}

/// Reads and writes of a collective that works on `dense` in place and lands the result
/// in `tensor` (all_reduce, broadcast); none for cpu tensors, which no stream touches.
Operands in_place(const Tensor& tensor, const Tensor& dense) {
  if (!tensor.defined() || !tensor.is_cuda()) return {};
  Operands operands{{dense}, {tensor}};
  if (dense.defined() && !dense.is_same(tensor)) operands.writes.push_back(dense);
  return operands;
}

class GlooGroup final : public ProcessGroup {
 public:
  explicit GlooGroup(const GroupSetup& setup)
      : ProcessGroup(setup.rank, setup.world_size),
        store_(setup.store),
        prefix_(setup.prefix),
        store_host_(setup.store_host),
        timeout_(setup.timeout) {
    ignore_sigpipe_unless_handled();
    gloo::transport::tcp::attr attr;
    if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) {
      attr.iface = iface;
    } else {
      // The address this rank reaches the store from: one the peers can reach too, in the
      // master address's family (Gloo's peers must all be IPv4 or all be IPv6).
      attr.hostname = setup.local_address.empty() ? "127.0.0.1" : setup.local_address;
      // Checked here: Gloo's own check throws past its freeaddrinfo (a leak per failure).
      std::string why = net::bind_error(attr.hostname);
      EMBER_CHECK(why.empty(), DistributedError, "init_process_group: Gloo cannot listen on address ", attr.hostname,
                  " of rank ", setup.rank, ": ", why,
                  "; set GLOO_SOCKET_IFNAME to the interface its peers reach it on");
    }
    try {
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto context = std::make_shared<gloo::rendezvous::Context>(setup.rank, setup.world_size);
      context->setTimeout(setup.timeout);
      GlooStore store(*setup.store, setup.prefix + "gloo/");
      context->connectFullMesh(store, device);
      exchange_.emplace(context);
      context_ = std::move(context);
    } catch (const gloo::Exception& e) {
      const bool timed_out = std::strstr(e.what(), "Timed out") != nullptr;
      fail<DistributedError>("init_process_group: Gloo could not connect rank ", setup.rank, " to its peers: ",
                             describe_peers(*store_, prefix_, rank(), world_size(), timeout_, store_host_, timed_out),
                             e.what());
    } catch (const DistributedError& e) {
      // The store: a peer's address never came (it died after meeting), or the store's host is gone.
      fail<DistributedError>("init_process_group: Gloo could not connect rank ", setup.rank, " to its peers: ",
                             describe_peers(*store_, prefix_, rank(), world_size(), timeout_, store_host_, true),
                             e.what());
    } catch (const gloo::EnforceNotMet& e) {
      // Gloo's checks: an address this host cannot bind, or peers of different address families.
      fail<DistributedError>("init_process_group: Gloo could not connect rank ", setup.rank, " to its peers from ",
                             attr.iface.empty() ? "address " + attr.hostname : "interface " + attr.iface, ": ",
                             e.what());
    }
    worker_ = std::thread([this] { run_worker(); });
  }

  ~GlooGroup() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    queue_cv_.notify_all();
    worker_.join();
    // Before the Gloo connections close (Note [Peers in transport errors]); the worker is
    // joined, so broken_ is this thread's to read.
    mark_left(*store_, prefix_, rank(), /*after_failure=*/!broken_.empty());
  }

  const char* backend_name() const noexcept override { return "gloo"; }

  std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op, bool async_op) override {
    std::vector<Tensor> tensors{tensor};
    const Tensor dense = dense_of(tensor);  // Note [Strided tensors in collectives]
    const AllReducePath path = all_reduce_path(dense);
    Tensor payload;  // what rides in the record exchange
    if (path == AllReducePath::InExchange) payload = dense;
    if (path == AllReducePath::Gathered) {
      payload = dense.detach().view({-1}).narrow(0, 0, static_cast<int64_t>(kHeadBytes / dense.element_size()));
    }
    return issue(async_op, Collective::AllReduce, tensors, in_place(tensor, dense), tensor, op, -1, payload, [&] {
      check_dense("all_reduce", tensors);
      check_writable(tensor);
      ReduceFn reduce = reduce_function(op, tensor.dtype(), "all_reduce");
      if (path == AllReducePath::InExchange) {
        return RunFn([this, tensor, dense, op, reduce](const RecordExchange& exchange) {
          size_t n = static_cast<size_t>(dense.numel());
          if (n == 0) return;
          reduce_in_rank_order(
              reduce, dense.data_ptr(), [&](int r) { return exchange.payload(r); }, n);
          if (op == ReduceOp::AVG) divide(dense.data_ptr(), dense.dtype(), n, world_size());
          write_into(tensor, dense.data_ptr());
        });
      }
      if (path == AllReducePath::Gathered) {
        return RunFn([this, tensor, dense, op, reduce, tag = next_tag()](const RecordExchange& exchange) {
          const size_t element = dense.element_size(), n = static_cast<size_t>(dense.numel());
          const size_t head = kHeadBytes / element, rest_bytes = (n - head) * element;
          auto* data = static_cast<uint8_t*>(dense.data_ptr());
          gathered_.resize(rest_bytes * static_cast<size_t>(world_size()));
          gloo::AllgathervOptions options(context_);
          options.setInput(data + kHeadBytes, rest_bytes);
          options.setOutput(gathered_.data(), std::vector<size_t>(static_cast<size_t>(world_size()), rest_bytes));
          options.setTag(tag);
          options.setTimeout(timeout_);
          gloo::allgatherv(options);
          reduce_in_rank_order(
              reduce, data, [&](int r) { return exchange.payload(r); }, head);
          reduce_in_rank_order(
              reduce, data + kHeadBytes, [&](int r) { return gathered_.data() + static_cast<size_t>(r) * rest_bytes; },
              n - head);
          if (op == ReduceOp::AVG) divide(data, dense.dtype(), n, world_size());
          write_into(tensor, data);
        });
      }
      return RunFn([this, tensor, dense, op, reduce, tag = next_tag()](const RecordExchange&) {
        if (dense.numel() == 0) return;
        dispatch(dense.dtype(), [&](auto type) {
          using T = typename decltype(type)::type;
          gloo::AllreduceOptions options(context_);
          options.setOutput(static_cast<T*>(dense.data_ptr()), static_cast<size_t>(dense.numel()));
          options.setReduceFunction(reduce);
          options.setTag(tag);
          options.setTimeout(timeout_);
          gloo::allreduce(options);
        });
        if (op == ReduceOp::AVG)
          divide(dense.data_ptr(), dense.dtype(), static_cast<size_t>(dense.numel()), world_size());
        write_into(tensor, dense.data_ptr());
      });
    });
  }

  std::shared_ptr<Work> broadcast(const Tensor& tensor, int root, bool async_op) override {
    std::vector<Tensor> tensors{tensor};
    const Tensor dense = dense_of(tensor);  // Note [Strided tensors in collectives]
    const Operands operands = in_place(tensor, dense);
    return issue(async_op, Collective::Broadcast, tensors, operands, tensor, ReduceOp::SUM, root, Tensor(), [&] {
      check_dense("broadcast", tensors);
      check_writable(tensor);
      EMBER_CHECK(root >= 0 && root < world_size(), ValueError, "broadcast: invalid root rank ", root,
                  " for a world of ", world_size(), " ranks");
      return RunFn([this, tensor, dense, root, tag = next_tag()](const RecordExchange&) {
        if (dense.numel() == 0) return;
        gloo::BroadcastOptions options(context_);
        options.setOutput(static_cast<uint8_t*>(dense.data_ptr()), dense.nbytes());
        options.setRoot(root);
        options.setTag(tag);
        options.setTimeout(timeout_);
        gloo::broadcast(options);
        write_into(tensor, dense.data_ptr());
      });
    });
  }

  std::shared_ptr<Work> all_gather(const std::vector<Tensor>& outputs, const Tensor& input, bool async_op) override {
    std::vector<Tensor> tensors(outputs);
    tensors.push_back(input);
    const Tensor dense = dense_of(input);  // Note [Strided tensors in collectives]
    const Operands operands = cuda_operands({dense}, outputs);
    return issue(async_op, Collective::AllGather, tensors, operands, input, ReduceOp::SUM, -1, Tensor(), [&] {
      check_list("all_gather", "output", outputs, input, world_size());
      check_dense("all_gather", tensors);
      for (const Tensor& t : outputs) check_writable(t);
      return RunFn([this, outputs, dense, tag = next_tag()](const RecordExchange&) {
        size_t bytes = dense.nbytes();
        if (bytes == 0) return;
        std::vector<uint8_t> gathered(bytes * static_cast<size_t>(world_size()));
        gloo::AllgatherOptions options(context_);
        options.setInput(static_cast<uint8_t*>(dense.data_ptr()), bytes);
        options.setOutput(gathered.data(), gathered.size());
        options.setTag(tag);
        options.setTimeout(timeout_);
        gloo::allgather(options);
        for (size_t i = 0; i < outputs.size(); ++i) write_into(outputs[i], gathered.data() + i * bytes);
      });
    });
  }

  std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                                       bool async_op) override {
    std::vector<Tensor> tensors(inputs);
    tensors.push_back(output);
    std::vector<Tensor> dense;  // Note [Strided tensors in collectives]
    for (const Tensor& t : inputs) dense.push_back(dense_of(t));
    const Operands operands = cuda_operands(dense, {output});
    return issue(async_op, Collective::ReduceScatter, tensors, operands, output, op, -1, Tensor(), [&] {
      check_list("reduce_scatter", "input", inputs, output, world_size());
      check_dense("reduce_scatter", tensors);
      check_writable(output);
      ReduceFn reduce = reduce_function(op, output.dtype(), "reduce_scatter");
      return RunFn([this, output, dense, op, reduce, tag = next_tag()](const RecordExchange&) {
        size_t bytes = output.nbytes(), numel = static_cast<size_t>(output.numel());
        if (bytes == 0) return;
        std::vector<uint8_t> flat(bytes * dense.size());
        for (size_t i = 0; i < dense.size(); ++i) std::memcpy(flat.data() + i * bytes, dense[i].data_ptr(), bytes);
        dispatch(output.dtype(), [&](auto type) {
          using T = typename decltype(type)::type;
          gloo::AllreduceOptions options(context_);
          options.setOutput(reinterpret_cast<T*>(flat.data()), numel * dense.size());
          options.setReduceFunction(reduce);
          options.setTag(tag);
          options.setTimeout(timeout_);
          gloo::allreduce(options);
        });
        uint8_t* mine = flat.data() + static_cast<size_t>(rank()) * bytes;
        if (op == ReduceOp::AVG) divide(mine, output.dtype(), numel, world_size());
        write_into(output, mine);
      });
    });
  }

  std::shared_ptr<Work> barrier(bool async_op) override {
    // The record exchange is an all-gather: no rank passes it before every rank entered.
    return issue(async_op, Collective::Barrier, {}, Operands{}, Tensor(), ReduceOp::SUM, -1, Tensor(),
                 [] { return RunFn([](const RecordExchange&) {}); });
  }

 private:
  using RunFn = std::function<void(const RecordExchange&)>;

  // Note [All-reduce paths]
  // InExchange: at most kHeadBytes; the data rides in the record exchange and every rank
  //   reduces the gathered copies locally in rank order (so all ranks get the same bits).
  // Gathered: larger, while (world size - 1) * bytes <= kGatherLimit; the first kHeadBytes
  //   ride in the record exchange, a gloo::allgatherv brings the rest, then the same local
  //   reduction. Two transfers instead of the exchange plus the ring's 2 (W - 1) steps,
  //   moving (W - 1) * bytes per rank (the ring moves 2 (W - 1) / W * bytes).
  // Ring: gloo::allreduce after the exchange.
  // The path follows from the tensor's size and the world size alone; ranks that disagree
  // on the size fail in the record check before any of the paths' own transfers.
  enum class AllReducePath { InExchange, Gathered, Ring };
  static constexpr size_t kHeadBytes = RecordExchange::kPayloadCapacity;
  static constexpr size_t kGatherLimit = size_t{2} << 20;

  AllReducePath all_reduce_path(const Tensor& tensor) const {
    if (!tensor.defined()) return AllReducePath::Ring;  // refused in the check
    const size_t bytes = tensor.nbytes();
    if (bytes <= kHeadBytes) return AllReducePath::InExchange;
    const auto peers = static_cast<size_t>(world_size() - 1);
    if (peers > 0 && bytes * peers <= kGatherLimit) return AllReducePath::Gathered;
    return AllReducePath::Ring;
  }

  /// out = part(0) op part(1) op ... op part(W - 1), over n elements (out may be any part's
  /// source: the parts are gathered copies).
  template <typename PartFn>
  void reduce_in_rank_order(const ReduceFn& reduce, void* out, PartFn part, size_t n) const {
    if (world_size() == 1 || n == 0) return;  // out already holds the only part
    reduce(out, part(0), part(1), n);
    for (int r = 2; r < world_size(); ++r) reduce(out, out, part(r), n);
  }

  /// Validates on the calling thread, then queues the collective. An argument error is
  /// still queued, as a failed record, so that the peers fail too instead of waiting.
  template <typename Prepare>
  std::shared_ptr<Work> issue(bool async_op, Collective collective, const std::vector<Tensor>& tensors,
                              const Operands& operands, const Tensor& shape_of, ReduceOp op, int root,
                              const Tensor& payload, Prepare&& prepare) {
    auto pending = std::make_unique<PendingOp>();
    std::exception_ptr argument_error;
    std::optional<cuda::Stream> capturing;  // the caller's stream, when it is capturing
    std::lock_guard issue_lock(issue_mutex_);
    pending->record = make_record(++sequence_, collective, op, shape_of.defined() ? shape_of.dtype() : DType::Float32,
                                  shape_of.defined() ? shape_of.numel() : 0, root);
    try {
      pending->run = prepare();
      pending->payload = payload;
      if (!tensors.empty() && tensors.front().is_cuda()) {
        const int device = tensors.front().get_device();
        pending->device = device;
        cuda::Stream current = cuda::current_stream(device);
        if (backend().capture_status(current.state()->native()).first != CaptureStatus::None) capturing = current;
        for (const Tensor& t : operands.reads) pending->reads.push_back(make_arg(t));
        for (const Tensor& t : operands.writes) pending->writes.push_back(make_arg(t));
      }
      if (pending->device >= 0 && !capturing) {
        const int device = pending->device;
        pending->ready.emplace();
        pending->ready->record(cuda::current_stream(device));
        pending->stream = stream_of(device);
        // The caching allocator then keeps the memory from the stream's next users until
        // the collective's work there is done, as ProcessGroupNCCL's side stream.
        for (const Tensor& t : operands.reads) t.record_stream(*pending->stream);
        for (const Tensor& t : operands.writes) t.record_stream(*pending->stream);
      }
    } catch (const std::exception& e) {
      argument_error = std::current_exception();
      set_failure(pending->record, e.what());
    }
    auto work = std::make_shared<HostWork>(argument_error ? std::vector<Tensor>{} : tensors);
    pending->work = work;
    if (capturing && !argument_error) return issue_captured(std::move(pending), *capturing);
    std::unique_lock lock(mutex_);
    if (!async_op && !argument_error && queue_.empty() && !worker_busy_) {
      // The caller would only wait: run it here and spare two thread hand-offs. The worker
      // stays idle meanwhile (nothing is queued, and issue_mutex_ keeps it so).
      worker_busy_ = true;
      lock.unlock();
      work->finish(execute(*pending));
      lock.lock();
      worker_busy_ = false;
      lock.unlock();
      idle_cv_.notify_all();
      return work;
    }
    queue_.push_back(std::move(pending));
    lock.unlock();
    queue_cv_.notify_one();
    if (argument_error) std::rethrow_exception(argument_error);
    return work;
  }

  // Note [Collectives in a captured graph]
  // A collective on cuda tensors issued on a capturing stream (a DDP step captured whole, on
  // emulated devices) becomes a host-task node of that capture, on that stream: each replay
  // runs the whole collective there (record exchange, transport, reduction, writing the
  // result back) as the executing thread, once the worker is idle, keeping it so. Its record
  // and tags are the capture's: every rank replays the same graph's collectives in the same
  // order, so the records agree replay after replay, and the in-order peer connections keep
  // one replay's transfers apart from the next one's. The work is complete at once (the
  // capture stream orders the node before what follows it). A collective that fails in a
  // replay cannot throw there: it breaks the group, and the next collective reports it. The
  // group must outlive the graph's replays, as with ProcessGroupNCCL. A replayed collective
  // waits for the collectives issued before it on this rank to finish; one issued after a
  // replay() whose work waits for that replay's stream must not be issued before the replay
  // has run (synchronize first), or the worker and the replay wait for each other.
  std::shared_ptr<Work> issue_captured(std::unique_ptr<PendingOp> pending, const cuda::Stream& stream) {
    std::shared_ptr<PendingOp> op(std::move(pending));
    HostTask task;
    task.name = collective_name(static_cast<Collective>(op->record.collective));
    task.device = op->device;
    task.outputs = op->writes;
    task.inputs = op->reads;
    task.body = [this, op] { run_replayed(*op); };
    backend().launch_host_task(stream.state()->native(), std::move(task));
    op->work->finish(nullptr);
    return op->work;
  }

  void run_replayed(PendingOp& op) noexcept {
    {
      std::unique_lock lock(mutex_);
      idle_cv_.wait(lock, [&] { return queue_.empty() && !worker_busy_; });
      worker_busy_ = true;
    }
    std::exception_ptr error;
    if (broken_.empty()) error = exchange_and_run(op);
    if (error && broken_.empty()) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        broken_ = cat("rank ", rank(), ": a collective replayed by a graph failed: ", e.what());
      }
    }
    {
      std::lock_guard lock(mutex_);
      worker_busy_ = false;
    }
    idle_cv_.notify_all();
    queue_cv_.notify_one();
  }

  /// The Gloo tag of the current collective's data transfer (even); its record exchange
  /// uses the odd one after it (record_tag), so the two never share a Gloo slot.
  uint32_t next_tag() noexcept { return static_cast<uint32_t>(sequence_ * 2); }
  static uint32_t record_tag(uint64_t sequence) noexcept { return static_cast<uint32_t>(sequence * 2 + 1); }

  void check_dense(const char* op, const std::vector<Tensor>& tensors) const {
    for (const Tensor& t : tensors) {
      EMBER_CHECK(t.defined(), ValueError, op, ": expected a defined tensor");
      EMBER_CHECK(t.device() == tensors.front().device(), DeviceError, op,
                  ": Expected all tensors to be on the same device, but found at least two devices, ",
                  tensors.front().device(), " and ", t.device(), "!");
    }
    if (!tensors.empty() && tensors.front().is_cuda()) {
      EMBER_CHECK(backend().device_memory_is_host_addressable(), DeviceError, op,
                  ": the gloo backend serves cpu tensors and emulated cuda tensors; use the nccl backend for ",
                  tensors.front().device(), " on the driver backend");
    }
  }

  void run_worker() {
    for (;;) {
      std::unique_ptr<PendingOp> op;
      {
        std::unique_lock lock(mutex_);
        // Not while a graph's replay runs a collective (Note [Collectives in a captured graph]).
        queue_cv_.wait(lock, [&] { return (stopping_ && queue_.empty()) || (!queue_.empty() && !worker_busy_); });
        if (queue_.empty()) return;
        op = std::move(queue_.front());
        queue_.pop_front();
        worker_busy_ = true;
      }
      op->work->finish(execute(*op));
      op.reset();  // the tensors go before the next collective is issued
      {
        std::lock_guard lock(mutex_);
        worker_busy_ = false;
      }
      idle_cv_.notify_all();
    }
  }

  // Note [Collectives as stream work]
  // On emulated cuda tensors Gloo's transport reads and writes device memory, which is
  // host memory there. It does so as a host task (Note [Host tasks]) on the group's
  // stream of the device, as ProcessGroupNCCL's kernels run on its side stream: the
  // stream first waits for the event recorded on the calling stream at the call, and the
  // task declares the collective's operands (reads: its inputs; writes: the tensors it
  // fills), so the stream sanitizer sees the collective as it sees a kernel. The task is
  // the whole collective (record exchange, transport, reduction, writing the result
  // back), run on the stream's worker while the executing thread (the group's worker, or
  // the caller) blocks for it; a device that failed before it skips it, and the failure
  // is exchanged with the peers as before. Work::wait() then makes the caller's current
  // stream wait for the task's end, as NcclWork::wait() does. cpu tensors run on the
  // executing thread.
  std::exception_ptr execute(PendingOp& op) {
    const char* name = collective_name(static_cast<Collective>(op.record.collective));
    if (!broken_.empty()) {
      return std::make_exception_ptr(DistributedError(
          cat(name, " (collective #", op.record.sequence, "): the process group failed earlier: ", broken_)));
    }
    if (!op.stream || op.record.failed) return exchange_and_run(op);
    std::exception_ptr result;
    cuda::Event end;
    try {
      op.stream->wait_event(*op.ready);
      run_on_stream(
          *op.stream, name, op.device, std::move(op.writes), std::move(op.reads),
          [&] { result = exchange_and_run(op); }, end);
    } catch (const std::exception& e) {
      // It never ran: the device failed before it, or the sanitizer refused it.
      std::exception_ptr stream_error = std::current_exception();
      set_failure(op.record, e.what());
      exchange_and_run(op);  // the failed record tells the peers
      return stream_error;
    }
    if (end.is_recorded()) op.work->set_end(std::move(end), op.device);
    return result;
  }

  /// The record exchange, then (when the records agree) the collective itself.
  std::exception_ptr exchange_and_run(PendingOp& op) {
    const char* name = collective_name(static_cast<Collective>(op.record.collective));
    try {
      bool send_payload = op.payload.defined() && !op.record.failed;
      exchange_->exchange(op.record, send_payload ? op.payload.data_ptr() : nullptr,
                          send_payload ? op.payload.nbytes() : 0, record_tag(op.record.sequence), timeout_);
      if (op.record.failed) return {};  // the caller already got its argument error
      check_records(exchange_->records(), rank());
      op.run(*exchange_);
      return {};
    } catch (const gloo::Exception& e) {
      // Gloo's IoException has no kind: its timeouts say "Timed out" (gloo/transport/tcp).
      const bool timed_out = std::strstr(e.what(), "Timed out") != nullptr;
      broken_ = cat("rank ", rank(), ": ",
                    describe_peers(*store_, prefix_, rank(), world_size(), timeout_, store_host_, timed_out), e.what());
      return std::make_exception_ptr(
          DistributedError(cat(name, " (collective #", op.record.sequence, ") failed on ", broken_)));
    } catch (...) {
      return std::current_exception();
    }
  }

  /// The group's stream of `device` (with issue_mutex_ held).
  cuda::Stream stream_of(int device) {
    auto it = streams_.find(device);
    if (it == streams_.end()) it = streams_.emplace(device, cuda::Stream(device)).first;
    return it->second;
  }

  std::shared_ptr<ember::distributed::Store> store_;
  std::string prefix_;
  std::string store_host_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::Context> context_;
  std::optional<RecordExchange> exchange_;  // by the executing thread
  std::vector<uint8_t> gathered_;           // by the executing thread: a Gathered all_reduce's rest
  std::string broken_;                      // by the executing thread (worker_busy_ makes it one at a time)

  std::mutex issue_mutex_;  // sequence numbers and queue order agree
  uint64_t sequence_ = 0;
  std::map<int, cuda::Stream> streams_;  // by device, guarded by issue_mutex_ (Note [Collectives as stream work])
  std::mutex mutex_;
  std::condition_variable queue_cv_;
  std::condition_variable idle_cv_;  // worker_busy_ cleared (Note [Collectives in a captured graph])
  std::deque<std::unique_ptr<PendingOp>> queue_;
  bool stopping_ = false;
  bool worker_busy_ = false;  // a collective is executing (on the worker or inline)
  std::thread worker_;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_gloo_group(const GroupSetup& setup) { return std::make_unique<GlooGroup>(setup); }

}  // namespace ember::detail::distributed
