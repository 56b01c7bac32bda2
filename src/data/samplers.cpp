// Samplers: sequential, random (seeded) and distributed index orders.
//
// Note [Sampler permutations]
// Shuffled orders come from PyTorch's CPU generator and torch.randperm, reproduced exactly:
// the generator is mt19937 seeded with the seed's low 32 bits, and randperm(n) swaps
// r[i] with r[i + random() % (n - i)] for i in [0, n - 1). A RandomSampler also spends a
// second, discarded randperm at the end of each epoch, as PyTorch's generator-based
// RandomSampler.__iter__ does (its trailing `randperm(n)[:num_samples % n]`), so that epoch
// after epoch the orders match PyTorch's.
#include "data/samplers_impl.h"

#include <numeric>

#include "ember/data.h"
#include "ember/errors.h"
#include "kernels/philox.h"
#include "ops/fork_rng.h"

namespace ember::data {

namespace detail {

std::vector<size_t> randperm(size_t n, std::mt19937& generator) {
  std::vector<size_t> r(n);
  std::iota(r.begin(), r.end(), size_t{0});
  for (size_t i = 0; i + 1 < n; ++i) {
    size_t z = static_cast<size_t>(generator()) % (n - i);
    std::swap(r[i], r[i + z]);
  }
  return r;
}

std::mt19937 torch_generator(uint64_t seed) { return std::mt19937(static_cast<uint32_t>(seed & 0xffffffffu)); }

}  // namespace detail

std::vector<size_t> SequentialSampler::indices() {
  std::vector<size_t> r(size_);
  std::iota(r.begin(), r.end(), size_t{0});
  return r;
}

RandomSampler::RandomSampler(size_t size, uint64_t seed) : size_(size), generator_(detail::torch_generator(seed)) {}

RandomSampler::RandomSampler(size_t size, Generator generator) : size_(size), source_(std::move(generator)) {
  EMBER_CHECK(source_->device().is_cpu(), DeviceError,
              "RandomSampler: the generator must be a cpu generator, got one on ", source_->device());
}

std::vector<size_t> RandomSampler::indices() {
  if (source_) {
    // Two words of the generator's Philox stream seed this epoch's permutation.
    auto [seed, offset] = ember::detail::reserve_random(Device(DeviceType::CPU), 4, source_);
    std::seed_seq words{ember::detail::philox_word(seed, offset), ember::detail::philox_word(seed, offset + 1)};
    generator_.seed(words);
  }
  std::vector<size_t> r = detail::randperm(size_, generator_);
  // The trailing permutation PyTorch draws and discards (Note [Sampler permutations]).
  for (size_t i = 0; i + 1 < size_; ++i) generator_();
  return r;
}

DistributedSampler::DistributedSampler(size_t dataset_size, int num_replicas, int rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      drop_last_(drop_last),
      seed_(seed) {
  EMBER_CHECK(num_replicas >= 1, ValueError, "DistributedSampler: num_replicas should be a positive integer, but got ",
              num_replicas);
  EMBER_CHECK(rank >= 0 && rank < num_replicas, ValueError, "Invalid rank ", rank,
              ", rank should be in the interval [0, ", num_replicas - 1, "]");
  auto replicas = static_cast<size_t>(num_replicas);
  if (drop_last && dataset_size % replicas != 0) {
    // Drop the tail so that every rank gets the same amount: ceil((n - r) / r).
    num_samples_ = dataset_size < replicas ? 0 : (dataset_size - replicas + replicas - 1) / replicas;
  } else {
    num_samples_ = (dataset_size + replicas - 1) / replicas;
  }
  total_size_ = num_samples_ * replicas;
}

std::vector<size_t> DistributedSampler::indices() {
  std::vector<size_t> all;
  if (shuffle_) {
    std::mt19937 generator = detail::torch_generator(seed_ + epoch_);
    all = detail::randperm(dataset_size_, generator);
  } else {
    all.resize(dataset_size_);
    std::iota(all.begin(), all.end(), size_t{0});
  }
  if (!drop_last_) {
    // Pad by repeating the indices from the start (several times when they are fewer than the padding).
    size_t n = all.size();
    for (size_t i = 0; all.size() < total_size_ && n > 0; ++i) all.push_back(all[i % n]);
  } else {
    all.resize(total_size_);
  }
  std::vector<size_t> mine;
  mine.reserve(num_samples_);
  for (size_t i = static_cast<size_t>(rank_); i < total_size_; i += static_cast<size_t>(num_replicas_))
    mine.push_back(all[i]);
  return mine;
}

}  // namespace ember::data
