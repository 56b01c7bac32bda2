// ember::distributed: process groups on Gloo (cpu and emulated cuda tensors) and NCCL
// (the driver backend), the stores they meet through, and the collectives.
//
// As torch.distributed: one default process group per process, made by
// init_process_group() and ended by destroy_process_group(). Collectives run in the
// order each rank issues them; every rank must issue the same sequence. On cuda tensors
// a collective is ordered on the current stream (see ProcessGroup in
// src/distributed/process_group.h). Failures are DistributedErrors: a rank that never
// arrives (named, at init), and on the gloo backend a peer that dies, a mismatched call
// (named with the operation), or a timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ember/tensor.h"

namespace ember::distributed {

/// torch.distributed's default timeout for gloo (30 minutes).
inline constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::minutes(30);

enum class ReduceOp : uint8_t { SUM, AVG, PRODUCT, MIN, MAX };
/// "SUM", "AVG", ...
const char* reduce_op_name(ReduceOp op) noexcept;

// ---- stores -------------------------------------------------------------------------

/// A key-value store shared by the ranks (c10d::Store). Values are byte strings; add()
/// keeps a decimal counter, as PyTorch's stores do. Every blocking call gives up with a
/// DistributedError after the store's timeout.
class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  /// The value of `key`, waiting up to the timeout for it to be set.
  virtual std::string get(const std::string& key) = 0;
  /// Adds `amount` to the counter at `key` (0 when unset) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t amount) = 0;
  /// True when every key is set (does not wait).
  virtual bool check(const std::vector<std::string>& keys) = 0;
  /// Removes `key`; false when it was not set.
  virtual bool delete_key(const std::string& key) = 0;
  /// Waits until every key is set; DistributedError "wait timeout after ..." otherwise.
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;

  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) noexcept { timeout_ = timeout; }

 protected:
  explicit Store(std::chrono::milliseconds timeout) : timeout_(timeout) {}

 private:
  std::chrono::milliseconds timeout_;
};

class TCPStoreServer;

/// A store served over TCP by one process (the master) to every rank, as PyTorch's
/// TCPStore, over PyTorch's wire protocol too: a PyTorch rank joins ember's store, and an
/// ember rank joins a store PyTorch serves (torchrun's agent). The master serves on `port` of every IPv4 and IPv6
/// address (port 0: a free port, see port()) and is a client of its own server; the others connect to host:port (a host
/// name, an IPv4 or an IPv6 address such as "::1"), retrying until the timeout.
class TCPStore final : public Store {
 public:
  TCPStore(const std::string& host, int port, std::optional<int> world_size = std::nullopt, bool is_master = false,
           std::chrono::milliseconds timeout = std::chrono::seconds(300));
  ~TCPStore() override;
  TCPStore(const TCPStore&) = delete;
  TCPStore& operator=(const TCPStore&) = delete;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  /// Number of keys set.
  int64_t num_keys();

  const std::string& host() const noexcept { return host_; }
  /// The port served on (the one chosen when constructed with port 0).
  int port() const noexcept { return port_; }
  /// This process's address on the connection to the server (the interface that reaches it).
  std::string local_address() const;

  /// Tells the server which rank this client is, so that the server can report the rank
  /// if its connection closes without leave() (the process died).
  void register_rank(int rank);
  /// Ranks whose connection closed without leaving, in the order they closed; waits up
  /// to `timeout` for the first one.
  std::vector<int> departed_ranks(std::chrono::milliseconds timeout);
  /// Ends this client's membership cleanly (no departure is reported for it).
  void leave();
  /// Whether departed_ranks() can name departed ranks: true against ember's server, false
  /// against PyTorch's (torchrun's agent, a PyTorch rank 0), which keeps no such record.
  bool tracks_departures() const noexcept;

 private:
  class Client;
  std::string host_;
  int port_;
  std::unique_ptr<TCPStoreServer> server_;
  std::unique_ptr<Client> client_;
};

/// A store in a file every rank can open (PyTorch's FileStore, init_method "file://").
/// The file is removed when the last of `world_size` users destroys its store.
class FileStore final : public Store {
 public:
  FileStore(const std::string& path, int world_size = -1,
            std::chrono::milliseconds timeout = std::chrono::seconds(300));
  ~FileStore() override;
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t amount) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  int world_size_;
};

// ---- work -----------------------------------------------------------------------------

/// The handle of a collective (c10d::Work). A collective issued with async_op=false
/// returns a completed one.
class Work {
 public:
  virtual ~Work() = default;
  /// True once the collective has finished (successfully or not).
  virtual bool is_completed() = 0;
  /// True once finished without error.
  bool is_success();
  /// Waits for the collective and rethrows its error. On cuda tensors of the driver
  /// backend, makes the current stream wait instead of the host (as ProcessGroupNCCL).
  virtual void wait() = 0;
  /// The error the collective ended with, if any (null while running or on success); a
  /// new exception object of the original type each call.
  std::exception_ptr exception();
  /// The tensors the collective wrote.
  const std::vector<Tensor>& result() const noexcept { return outputs_; }

 protected:
  explicit Work(std::vector<Tensor> outputs) : outputs_(std::move(outputs)) {}
  /// Records `error`'s type and message. Only the record crosses threads: each waiter
  /// throws an exception object of its own.
  void set_exception(const std::exception_ptr& error);

 private:
  std::vector<Tensor> outputs_;
  std::mutex mutex_;
  int error_kind_ = 0;  // 0: no error
  std::string error_message_;
};

// ---- the default process group ------------------------------------------------------------

class InitOptions {
 public:
  /// "env://" (default): RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment
  /// (OpenMPI's OMPI_COMM_WORLD_RANK / _SIZE when RANK is unset; MASTER_ADDR defaults to
  /// 127.0.0.1; an IPv6 address is written bare, MASTER_ADDR=::1); "tcp://host:port"
  /// ("tcp://[::1]:29500" for an IPv6 address); "file:///path".
  InitOptions& init_method(std::string method) {
    init_method_ = std::move(method);
    return *this;
  }
  InitOptions& rank(int rank) {
    rank_ = rank;
    return *this;
  }
  InitOptions& world_size(int world_size) {
    world_size_ = world_size;
    return *this;
  }
  InitOptions& timeout(std::chrono::milliseconds timeout) {
    timeout_ = timeout;
    return *this;
  }
  /// A store to meet in instead of the init_method's (rank and world_size then required).
  InitOptions& store(std::shared_ptr<Store> store) {
    store_ = std::move(store);
    return *this;
  }

  const std::string& init_method() const noexcept { return init_method_; }
  int rank() const noexcept { return rank_; }
  int world_size() const noexcept { return world_size_; }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  const std::shared_ptr<Store>& store() const noexcept { return store_; }

 private:
  std::string init_method_ = "env://";
  int rank_ = -1;
  int world_size_ = -1;
  std::chrono::milliseconds timeout_ = kDefaultTimeout;
  std::shared_ptr<Store> store_;
};

/// Joins the default process group: meets every rank through the store (DistributedError
/// naming the missing ranks after the timeout), then connects the backend ("gloo" or "nccl").
void init_process_group(const std::string& backend, const InitOptions& options = InitOptions());
/// Leaves and destroys the default process group (waiting for its queued collectives).
void destroy_process_group();
bool is_initialized() noexcept;
/// Each throws DistributedError "Default process group has not been initialized, please
/// make sure to call init_process_group." before init_process_group.
int get_rank();
int get_world_size();
std::string get_backend();

/// Collectives take tensors of any layout on the gloo backend (a transpose, a column; an
/// expanded tensor only where it is read): results land in the tensor's own elements. A
/// tensor a collective writes must not have elements that share memory. The nccl backend
/// takes contiguous tensors only, as ProcessGroupNCCL.
///
/// Reduces `tensor` across ranks in place.
std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM, bool async_op = false);
/// Copies rank `src`'s `tensor` into every rank's `tensor`.
std::shared_ptr<Work> broadcast(const Tensor& tensor, int src, bool async_op = false);
/// outputs[i] = rank i's `tensor`; `outputs` has world_size tensors shaped as `tensor`.
std::shared_ptr<Work> all_gather(const std::vector<Tensor>& outputs, const Tensor& tensor, bool async_op = false);
/// output = reduction over ranks of their inputs[rank]; `inputs` has world_size tensors
/// shaped as `output`.
std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                     ReduceOp op = ReduceOp::SUM, bool async_op = false);
/// Returns once every rank has entered the barrier.
std::shared_ptr<Work> barrier(bool async_op = false);

}  // namespace ember::distributed
