// EpochRun: see the header and Note [DataLoader threads].
#include "data/epoch_run.h"

#include <sstream>
#include <string>

#include "data/collate.h"
#include "data/worker_error.h"
#include "ember/cuda.h"
#include "ember/errors.h"
#include "runtime/backend.h"

namespace ember::data::detail {
namespace {

// The pin-memory thread: pins loaded batches until the channel closes.
void pin_loop(BatchChannel& channel, int device) {
  const std::string where = "in pin memory thread for device " + std::to_string(device);
  std::exception_ptr setup_error;
  try {
    cuda::set_device(device);
    // Pinning allocates host memory and queries events beside the user's graph captures:
    // Relaxed, so that it never invalidates one (PyTorch's pin thread does the same).
    ember::detail::backend().exchange_capture_mode(ember::detail::CaptureMode::Relaxed);
  } catch (...) {
    setup_error = std::current_exception();
  }
  while (auto item = channel.take_loaded()) {
    Outcome& outcome = item->second;
    if (!outcome.error) {
      try {
        if (setup_error) std::rethrow_exception(setup_error);
        outcome.batch = pin_batch(outcome.batch);
      } catch (...) {
        outcome.error = std::current_exception();
        outcome.where = where;
      }
    }
    channel.put_ready(item->first, std::move(outcome));
  }
}

std::string seconds(std::chrono::milliseconds timeout) {
  std::ostringstream out;
  out << std::chrono::duration<double>(timeout).count();
  return out.str();
}

}  // namespace

EpochRun::EpochRun(std::shared_ptr<const Dataset> dataset, std::vector<std::vector<size_t>> batches,
                   std::shared_ptr<WorkerPool> pool, Config config)
    : dataset_(std::move(dataset)), batches_(std::move(batches)), pool_(std::move(pool)), config_(config) {
  if (!pool_) return;
  channel_ = std::make_shared<BatchChannel>(config_.pin_device.has_value());
  if (config_.pin_device) {
    pin_thread_ = std::thread([channel = channel_, device = *config_.pin_device] { pin_loop(*channel, device); });
  }
  dispatch();
}

void EpochRun::dispatch() {
  auto limit = static_cast<size_t>(config_.prefetch_factor) * static_cast<size_t>(pool_->size());
  while (sent_ < batches_.size() && sent_ - taken_ < limit) {
    int worker = static_cast<int>(sent_ % static_cast<size_t>(pool_->size()));
    pool_->submit(worker, {channel_, sent_, batches_[sent_]});
    ++sent_;
  }
}

Example EpochRun::load_here(size_t index) {
  Example batch = load_batch(*dataset_, batches_[index], nullptr);
  if (config_.pin_device) {
    cuda::DeviceGuard guard(*config_.pin_device);
    batch = pin_batch(batch);
  }
  return batch;
}

bool EpochRun::advance() {
  if (at_end_) return false;
  EMBER_CHECK(!shut_down_, Error,
              "DataLoader: this iterator's epoch was stopped (the loader began a new epoch with persistent workers, "
              "or was destroyed)");
  current_.reset();
  if (taken_ == batches_.size()) {
    at_end_ = true;
    shutdown();
    return false;
  }
  size_t index = taken_++;
  if (!pool_) {
    current_ = load_here(index);
    return true;
  }
  dispatch();
  std::optional<Outcome> outcome = channel_->take_ready(index, config_.timeout);
  pool_->set_stalled(!outcome.has_value());
  if (!outcome) --taken_;  // the next advance() waits for this batch again
  EMBER_CHECK(outcome.has_value(), Error, "DataLoader timed out after ", seconds(config_.timeout), " seconds");
  if (outcome->error) rethrow_caught(outcome->error, outcome->where);
  current_ = std::move(outcome->batch);
  return true;
}

const Example& EpochRun::current() const {
  EMBER_CHECK(current_.has_value(), ValueError, "DataLoader: dereferencing an iterator that holds no batch");
  return *current_;
}

void EpochRun::shutdown() noexcept {
  if (shut_down_) return;
  shut_down_ = true;
  if (channel_) channel_->close();
  if (pin_thread_.joinable()) pin_thread_.join();
  pool_.reset();
}

}  // namespace ember::data::detail
