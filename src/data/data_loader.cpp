// DataLoader: options, epochs and iteration. The threads are in worker_pool.cpp and
// epoch_run.cpp (Note [DataLoader threads]).
#include <iostream>
#include <mutex>

#include "data/epoch_run.h"
#include "data/worker_pool.h"
#include "ember/cuda.h"
#include "ember/data.h"
#include "ember/errors.h"

namespace ember::data {
namespace {

void check_options(const DataLoaderOptions& o) {
  EMBER_CHECK(o.batch_size() > 0, ValueError,
              "batch_size should be a positive integer value, but got batch_size=", o.batch_size());
  EMBER_CHECK(o.num_workers() >= 0, ValueError,
              "num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.");
  EMBER_CHECK(o.timeout().count() >= 0, ValueError, "timeout option should be non-negative");
  EMBER_CHECK(o.num_workers() > 0 || !o.prefetch_factor_set(), ValueError,
              "prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 to enable "
              "multiprocessing, otherwise set prefetch_factor to None.");
  EMBER_CHECK(o.prefetch_factor() > 0, ValueError,
              "prefetch_factor option should be a positive integer, but got prefetch_factor=", o.prefetch_factor());
  EMBER_CHECK(!o.persistent_workers() || o.num_workers() > 0, ValueError,
              "persistent_workers option needs num_workers > 0");
  EMBER_CHECK(o.sampler() == nullptr || !o.shuffle(), ValueError, "sampler option is mutually exclusive with shuffle");
}

// With pin_memory and no cuda device, batches stay pageable; PyTorch warns once.
std::optional<int> pin_device(bool pin_memory) {
  if (!pin_memory) return std::nullopt;
  if (!cuda::is_available()) {
    static std::once_flag warned;
    std::call_once(warned, [] {
      std::cerr << "UserWarning: 'pin_memory' argument is set as true but no accelerator is found, then device "
                   "pinned memory won't be used.\n";
    });
    return std::nullopt;
  }
  return cuda::current_device();
}

}  // namespace

// Given a reference, the loader holds a shared_ptr that owns nothing (Note [Workers left behind]).
DataLoader::DataLoader(const Dataset& dataset, DataLoaderOptions options)
    : DataLoader(std::shared_ptr<const Dataset>(std::shared_ptr<const Dataset>(), &dataset), options) {}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  EMBER_CHECK(dataset_ != nullptr, ValueError, "DataLoader: the dataset is null");
  check_options(options_);
  if (options_.sampler() != nullptr) {
    sampler_ = options_.sampler();
  } else if (options_.shuffle()) {
    own_random_ = options_.generator() ? std::make_unique<RandomSampler>(dataset_->size(), *options_.generator())
                                       : std::make_unique<RandomSampler>(dataset_->size(), options_.seed());
    sampler_ = own_random_.get();
  } else {
    own_sequential_ = std::make_unique<SequentialSampler>(dataset_->size());
    sampler_ = own_sequential_.get();
  }
}

DataLoader::~DataLoader() {
  for (auto& weak : runs_)
    if (auto run = weak.lock()) run->shutdown();
  persistent_pool_.reset();
}

size_t DataLoader::size() const {
  size_t n = sampler_->size(), b = static_cast<size_t>(options_.batch_size());
  return options_.drop_last() ? n / b : (n + b - 1) / b;
}

DataLoader::Iterator DataLoader::begin() {
  std::erase_if(runs_, [](const auto& weak) { return weak.expired(); });
  if (options_.persistent_workers()) {
    // The workers move on to the new epoch; an iterator of an earlier one stops (PyTorch resets it).
    for (auto& weak : runs_)
      if (auto run = weak.lock()) run->shutdown();
    runs_.clear();
    // Workers that timed out may still be stuck: the new epoch gets fresh ones.
    if (persistent_pool_ && persistent_pool_->stalled()) persistent_pool_.reset();
  }
  // PyTorch's iterator draws its workers' base seed from the loader's generator before the
  // sampler's permutation; drawing it too keeps shuffled orders equal to PyTorch's.
  if (own_random_) {
    own_random_->generator()();
    own_random_->generator()();
  }
  std::vector<size_t> indices = sampler_->indices();
  std::vector<std::vector<size_t>> batches;
  auto b = static_cast<size_t>(options_.batch_size());
  for (size_t start = 0; start < indices.size(); start += b) {
    size_t stop = std::min(indices.size(), start + b);
    if (stop - start < b && options_.drop_last()) break;
    batches.emplace_back(indices.begin() + static_cast<std::ptrdiff_t>(start),
                         indices.begin() + static_cast<std::ptrdiff_t>(stop));
  }

  detail::EpochRun::Config config;
  config.prefetch_factor = options_.prefetch_factor();
  config.pin_device = pin_device(options_.pin_memory());
  config.timeout = options_.timeout();
  std::shared_ptr<detail::WorkerPool> pool;
  if (options_.num_workers() > 0) {
    if (options_.persistent_workers()) {
      if (!persistent_pool_) persistent_pool_ = std::make_shared<detail::WorkerPool>(dataset_, options_.num_workers());
      pool = persistent_pool_;
    } else {
      pool = std::make_shared<detail::WorkerPool>(dataset_, options_.num_workers());
    }
  }
  auto run = std::make_shared<detail::EpochRun>(dataset_, std::move(batches), std::move(pool), config);
  runs_.push_back(run);
  return Iterator(std::move(run));
}

DataLoader::Iterator::Iterator(std::shared_ptr<detail::EpochRun> run) : run_(std::move(run)) { run_->advance(); }

const Example& DataLoader::Iterator::operator*() const {
  EMBER_CHECK(run_ != nullptr, ValueError, "DataLoader: dereferencing the end iterator");
  return run_->current();
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  EMBER_CHECK(run_ != nullptr, ValueError, "DataLoader: incrementing the end iterator");
  run_->advance();
  return *this;
}

bool DataLoader::Iterator::operator==(const Iterator& other) const noexcept {
  bool end = run_ == nullptr || run_->at_end();
  bool other_end = other.run_ == nullptr || other.run_->at_end();
  if (end || other_end) return end == other_end;
  return run_ == other.run_;
}

}  // namespace ember::data
