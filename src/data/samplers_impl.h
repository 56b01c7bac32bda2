// PyTorch's CPU generator and torch.randperm, for the shuffling samplers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace ember::data::detail {

/// torch.Generator().manual_seed(seed): mt19937 seeded with the seed's low 32 bits.
std::mt19937 torch_generator(uint64_t seed);
/// torch.randperm(n, generator=generator) for n < 2^32, drawing n - 1 numbers.
std::vector<size_t> randperm(size_t n, std::mt19937& generator);

}  // namespace ember::data::detail
