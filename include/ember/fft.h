// ember::fft: discrete Fourier transforms (torch.fft) on every backend.
#pragma once

#include <optional>
#include <string>

#include "ember/tensor.h"

namespace ember::fft {

// n: signal length (trimmed or zero-padded; default the input's size), dim: the
// transformed dimension, norm: "backward" (default), "forward" or "ortho".
Tensor fft(const Tensor& input, std::optional<int64_t> n = std::nullopt, int64_t dim = -1,
           const std::string& norm = "backward");
Tensor ifft(const Tensor& input, std::optional<int64_t> n = std::nullopt, int64_t dim = -1,
            const std::string& norm = "backward");
Tensor rfft(const Tensor& input, std::optional<int64_t> n = std::nullopt, int64_t dim = -1,
            const std::string& norm = "backward");
/// n is the length of the real output (default 2 * (input.size(dim) - 1)).
Tensor irfft(const Tensor& input, std::optional<int64_t> n = std::nullopt, int64_t dim = -1,
             const std::string& norm = "backward");
Tensor fft2(const Tensor& input, std::optional<IntList> s = std::nullopt, IntList dim = {-2, -1},
            const std::string& norm = "backward");
Tensor ifft2(const Tensor& input, std::optional<IntList> s = std::nullopt, IntList dim = {-2, -1},
             const std::string& norm = "backward");

}  // namespace ember::fft
