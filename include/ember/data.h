// ember::data: datasets, samplers and the DataLoader (torch.utils.data).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ember/device.h"
#include "ember/tensor.h"

namespace ember::data {

/// A dataset item, and a batch of them (each field stacked along a new first dimension).
struct Example {
  Tensor data, target;
};

/// A map-style dataset: items by index. get() may run on worker threads, concurrently.
struct Dataset {
  virtual ~Dataset() = default;
  virtual size_t size() const = 0;
  virtual Example get(size_t index) const = 0;
};

/// Rows of two tensors that share their first dimension (torch.utils.data.TensorDataset).
class TensorDataset : public Dataset {
 public:
  /// ValueError "Size mismatch between tensors" unless data and target have as many rows.
  TensorDataset(Tensor data, Tensor target);
  size_t size() const override;
  /// {data[index], target[index]}; IndexError past the end.
  Example get(size_t index) const override;

 private:
  Tensor data_, target_;
};

/// Fashion-MNIST from the gzipped IDX files in `root` (Debian's dataset-fashion-mnist installs
/// them in /usr/share/datasets/fashion-mnist): 60000 training or 10000 test items, data
/// float32 [1, 28, 28] in [0, 1] (byte / 255), target an int64 scalar (the class, 0-9).
class FashionMNIST : public Dataset {
 public:
  static constexpr const char* kDefaultRoot = "/usr/share/datasets/fashion-mnist";
  explicit FashionMNIST(const std::string& root = kDefaultRoot, bool train = true);
  size_t size() const override;
  Example get(size_t index) const override;
  /// All images [N, 1, 28, 28] float32 and all labels [N] int64.
  const Tensor& images() const noexcept { return images_; }
  const Tensor& targets() const noexcept { return targets_; }

 private:
  Tensor images_, targets_;
};

// ---- samplers ------------------------------------------------------------------

/// The order in which a DataLoader visits dataset indices, one epoch at a time.
class Sampler {
 public:
  virtual ~Sampler() = default;
  /// Number of indices per epoch (len(sampler)).
  virtual size_t size() const = 0;
  /// The indices of the next epoch (iter(sampler)); may advance the sampler's state.
  virtual std::vector<size_t> indices() = 0;
};

/// 0, 1, ..., size - 1.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(size_t size) : size_(size) {}
  size_t size() const override { return size_; }
  std::vector<size_t> indices() override;

 private:
  size_t size_;
};

/// A fresh permutation every epoch from one seeded generator: epoch after epoch, the orders of
/// PyTorch's RandomSampler(range(size), generator=torch.Generator().manual_seed(seed)).
class RandomSampler : public Sampler {
 public:
  RandomSampler(size_t size, uint64_t seed);
  /// Each epoch's permutation seeded by a draw from `generator` (PyTorch's
  /// RandomSampler(data, generator=g)): restoring the generator's state (get_state/set_state)
  /// repeats the orders from there. Not PyTorch's numbers (ember's generators are Philox).
  RandomSampler(size_t size, Generator generator);
  size_t size() const override { return size_; }
  std::vector<size_t> indices() override;
  /// The generator (PyTorch's CPU generator: mt19937 seeded with the seed's low 32 bits).
  std::mt19937& generator() noexcept { return generator_; }

 private:
  size_t size_;
  std::mt19937 generator_;
  std::optional<Generator> source_;  // reseeds generator_ every epoch when given
};

/// This rank's share of the indices, partitioned as PyTorch's DistributedSampler: the
/// (optionally shuffled, by seed + epoch) indices are padded by repeating them from the
/// start up to a multiple of num_replicas (or trimmed to one with drop_last), and rank r
/// takes every num_replicas-th index starting at r.
class DistributedSampler : public Sampler {
 public:
  /// ValueError for num_replicas < 1 or a rank outside [0, num_replicas - 1].
  DistributedSampler(size_t dataset_size, int num_replicas, int rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  size_t size() const override { return num_samples_; }
  std::vector<size_t> indices() override;
  /// Reshuffles: the next epoch's permutation comes from seed + epoch.
  void set_epoch(uint64_t epoch) noexcept { epoch_ = epoch; }
  uint64_t epoch() const noexcept { return epoch_; }
  /// num_samples * num_replicas.
  size_t total_size() const noexcept { return total_size_; }

 private:
  size_t dataset_size_;
  int num_replicas_, rank_;
  bool shuffle_, drop_last_;
  uint64_t seed_, epoch_ = 0;
  size_t num_samples_, total_size_;
};

// ---- the loader ------------------------------------------------------------------

/// DataLoader settings; each setter modifies in place and returns *this.
class DataLoaderOptions {
 public:
  /// Items per batch; signed as PyTorch's, so that a negative size is refused, not wrapped.
  DataLoaderOptions& batch_size(int64_t v) {
    batch_size_ = v;
    return *this;
  }
  DataLoaderOptions& shuffle(bool v) {
    shuffle_ = v;
    return *this;
  }
  /// Use `sampler` (not owned; it must outlive the loader) instead of sequential or shuffled order.
  DataLoaderOptions& sampler(Sampler& v) {
    sampler_ = &v;
    return *this;
  }
  DataLoaderOptions& num_workers(int v) {
    num_workers_ = v;
    return *this;
  }
  DataLoaderOptions& pin_memory(bool v) {
    pin_memory_ = v;
    return *this;
  }
  DataLoaderOptions& drop_last(bool v) {
    drop_last_ = v;
    return *this;
  }
  /// Batches loaded in advance per worker (default 2); needs num_workers > 0.
  DataLoaderOptions& prefetch_factor(int v) {
    prefetch_factor_ = v;
    return *this;
  }
  DataLoaderOptions& persistent_workers(bool v) {
    persistent_workers_ = v;
    return *this;
  }
  /// How long to wait for a batch from the workers; 0 waits forever (see DataLoader).
  DataLoaderOptions& timeout(std::chrono::milliseconds v) {
    timeout_ = v;
    return *this;
  }
  /// Seeds the shuffling generator.
  DataLoaderOptions& seed(uint64_t v) {
    seed_ = v;
    return *this;
  }
  /// Shuffles with draws from `g` instead (PyTorch's generator= argument; RandomSampler(n, g)).
  DataLoaderOptions& generator(Generator g) {
    generator_ = std::move(g);
    return *this;
  }

  int64_t batch_size() const noexcept { return batch_size_; }
  bool shuffle() const noexcept { return shuffle_; }
  Sampler* sampler() const noexcept { return sampler_; }
  int num_workers() const noexcept { return num_workers_; }
  bool pin_memory() const noexcept { return pin_memory_; }
  bool drop_last() const noexcept { return drop_last_; }
  int prefetch_factor() const noexcept { return prefetch_factor_.value_or(2); }
  bool prefetch_factor_set() const noexcept { return prefetch_factor_.has_value(); }
  bool persistent_workers() const noexcept { return persistent_workers_; }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  uint64_t seed() const noexcept { return seed_; }
  const std::optional<Generator>& generator() const noexcept { return generator_; }

 private:
  int64_t batch_size_ = 1;
  bool shuffle_ = false;
  Sampler* sampler_ = nullptr;
  int num_workers_ = 0;
  bool pin_memory_ = false;
  bool drop_last_ = false;
  std::optional<int> prefetch_factor_;
  bool persistent_workers_ = false;
  std::chrono::milliseconds timeout_{0};
  uint64_t seed_ = 0;
  std::optional<Generator> generator_;
};

namespace detail {
class EpochRun;
class WorkerPool;
}  // namespace detail

/// Batches of a dataset, as torch.utils.data.DataLoader: worker threads load batches ahead
/// (prefetch_factor per worker) and they arrive in sampler order; with pin_memory (and a cuda
/// device) a pin-memory thread places them in pinned memory. A sampler given in the options
/// must outlive the loader; so must a dataset given by reference.
///
/// With a timeout, a wait for a batch that exceeds it throws ember::Error "DataLoader timed
/// out after <t> seconds", and the next increment waits for the same batch again. Leaving the
/// loop (or destroying the loader) after a timeout, before that batch arrived, returns at
/// once: a worker thread still loading a batch cannot be stopped, so the loader leaves it
/// behind (detached) and says so once on stderr. Such a thread exits as soon as its current
/// Dataset::get() returns and calls get() no more; until then the dataset, and whatever its
/// get() uses, must stay alive. A loader given a std::shared_ptr to the dataset shares its
/// ownership with such threads, which keep the dataset alive themselves. The process may exit
/// while a thread is left behind.
class DataLoader {
 public:
  /// An input iterator over one epoch; copies share the epoch.
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Example;
    using difference_type = std::ptrdiff_t;
    using pointer = const Example*;
    using reference = const Example&;

    Iterator() = default;
    const Example& operator*() const;
    const Example* operator->() const { return &**this; }
    /// Loads the next batch; rethrows a worker's error at its batch's position.
    Iterator& operator++();
    void operator++(int) { ++*this; }
    bool operator==(const Iterator& other) const noexcept;

   private:
    friend class DataLoader;
    explicit Iterator(std::shared_ptr<detail::EpochRun> run);
    std::shared_ptr<detail::EpochRun> run_;
  };

  /// ValueError for inconsistent options, with PyTorch's messages. The loader refers to
  /// `dataset`, which must outlive it (and any worker thread it left behind).
  DataLoader(const Dataset& dataset, DataLoaderOptions options = {});
  /// The loader, and any worker thread it leaves behind, share the ownership of `dataset`.
  /// ValueError if it is null.
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});
  /// Stops every thread the loader started, at once: joins them, except the workers left
  /// behind after a timeout (see above).
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Starts an epoch: draws the sampler's indices and loads the first batch.
  Iterator begin();
  Iterator end() const { return Iterator(); }
  /// Batches per epoch.
  size_t size() const;
  const DataLoaderOptions& options() const noexcept { return options_; }

 private:
  std::shared_ptr<const Dataset> dataset_;  // owns nothing when given a reference
  DataLoaderOptions options_;
  std::unique_ptr<RandomSampler> own_random_;
  std::unique_ptr<SequentialSampler> own_sequential_;
  Sampler* sampler_;
  std::shared_ptr<detail::WorkerPool> persistent_pool_;
  std::vector<std::weak_ptr<detail::EpochRun>> runs_;  // epochs begun and maybe still alive
};

}  // namespace ember::data
