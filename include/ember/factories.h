// Factory functions: torch.empty, zeros, ones, full, arange, rand, randn, tensor and *_like.
#pragma once

#include <cstdint>

#include "ember/tensor.h"

namespace ember {

// A device of "cuda" without an index means the current cuda device.
Tensor empty(const IntList& shape, const TensorOptions& options = {});
Tensor zeros(const IntList& shape, const TensorOptions& options = {});
Tensor ones(const IntList& shape, const TensorOptions& options = {});
Tensor full(const IntList& shape, const Scalar& value, const TensorOptions& options = {});
/// [0, end) with step 1; int64 unless options say otherwise.
Tensor arange(const Scalar& end, const TensorOptions& options = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1, const TensorOptions& options = {});
/// Uniform on [0, 1).
Tensor rand(const IntList& shape, const TensorOptions& options = {}, std::optional<Generator> generator = std::nullopt);
/// Standard normal.
Tensor randn(const IntList& shape, const TensorOptions& options = {},
             std::optional<Generator> generator = std::nullopt);
/// A tensor from nested lists; dtype inferred (bool, int64, float32, complex64) unless given.
Tensor tensor(const TensorData& data, const TensorOptions& options = {});

Tensor empty_like(const Tensor& t, const TensorOptions& options = {});
Tensor zeros_like(const Tensor& t, const TensorOptions& options = {});
Tensor ones_like(const Tensor& t, const TensorOptions& options = {});
Tensor full_like(const Tensor& t, const Scalar& value, const TensorOptions& options = {});
/// The random factories draw from `generator` when given, else from the device's default generator.
Tensor rand_like(const Tensor& t, const TensorOptions& options = {}, std::optional<Generator> generator = std::nullopt);
Tensor randn_like(const Tensor& t, const TensorOptions& options = {},
                  std::optional<Generator> generator = std::nullopt);

/// Seeds the default generators of the cpu and every cuda device (torch.manual_seed), those
/// made later included; a seed gives the same numbers on every backend. Generators of the
/// caller's (ember::Generator) are not touched. Per-device seeding and states: ember/generator.h.
void manual_seed(uint64_t seed);

}  // namespace ember
