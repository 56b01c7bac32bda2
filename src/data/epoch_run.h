// EpochRun: one pass over a DataLoader's batches, shared by the iterators of that pass.
//
// Without workers the consuming thread loads (and pins) each batch itself, as PyTorch's
// single-process iterator does. With workers, the run keeps prefetch_factor * num_workers
// batches queued beyond the one the consumer holds, hands them to the pool round-robin,
// and takes them back in order from its BatchChannel (Note [DataLoader threads]); with
// pinning, its own pin-memory thread sits between the workers and the consumer, with the
// cuda device current at the start of the epoch as its current device.
// All methods are for the consuming thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "data/batch_channel.h"
#include "data/worker_pool.h"
#include "ember/data.h"

namespace ember::data::detail {

class EpochRun {
 public:
  struct Config {
    int prefetch_factor = 2;
    std::optional<int> pin_device;  // set: pin every batch, with this cuda device current
    std::chrono::milliseconds timeout{0};
  };

  /// `pool` is null to load on the consuming thread.
  EpochRun(std::shared_ptr<const Dataset> dataset, std::vector<std::vector<size_t>> batches,
           std::shared_ptr<WorkerPool> pool, Config config);
  ~EpochRun() { shutdown(); }
  EpochRun(const EpochRun&) = delete;
  EpochRun& operator=(const EpochRun&) = delete;

  /// Moves to the next batch (the first, on the first call); false at the end of the epoch.
  /// Rethrows a worker's error at its batch's position; the run then goes on with the next.
  /// After a timeout the next call waits for the same batch again, as PyTorch's iterator;
  /// until a batch arrives the pool is stalled (Note [Workers left behind]).
  bool advance();
  /// The batch advance() moved to.
  const Example& current() const;
  bool at_end() const noexcept { return at_end_; }
  /// Stops the pass: closes the channel, joins the pin-memory thread and lets go of the
  /// pool (stopping its workers unless the loader keeps them). Idempotent.
  void shutdown() noexcept;

 private:
  void dispatch();
  Example load_here(size_t index);

  std::shared_ptr<const Dataset> dataset_;
  std::vector<std::vector<size_t>> batches_;
  std::shared_ptr<WorkerPool> pool_;
  Config config_;
  std::shared_ptr<BatchChannel> channel_;
  std::thread pin_thread_;
  size_t sent_ = 0;   // batches handed to the workers
  size_t taken_ = 0;  // batches handed to the consumer
  std::optional<Example> current_;
  bool at_end_ = false;
  bool shut_down_ = false;
};

}  // namespace ember::data::detail
