// nn::init: in-place parameter initialisation, as torch.nn.init.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "ember/generator.h"
#include "ember/tensor.h"

namespace ember::nn::init {

// Each fills `tensor` in place (without recording gradients) and returns it. The random ones
// draw from `generator` when given (PyTorch 2.x's generator= argument), else from the tensor's
// device's default generator; a generator of another device is refused as by Tensor::uniform_.
Tensor uniform_(Tensor tensor, double a = 0.0, double b = 1.0, std::optional<Generator> generator = std::nullopt);
Tensor normal_(Tensor tensor, double mean = 0.0, double std = 1.0, std::optional<Generator> generator = std::nullopt);
Tensor constant_(Tensor tensor, const Scalar& value);
Tensor zeros_(Tensor tensor);
Tensor ones_(Tensor tensor);

/// The recommended gain for a nonlinearity: "linear", "conv1d", "conv2d", "conv3d",
/// "conv_transpose1d/2d/3d", "sigmoid" (1), "tanh" (5/3), "relu" (sqrt 2), "leaky_relu"
/// (sqrt(2 / (1 + slope^2)), slope `param`, default 0.01), "selu" (3/4).
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);
/// (fan_in, fan_out) of a weight of at least 2 dimensions: size(1) and size(0), each times
/// the product of the remaining (receptive field) sizes.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);

/// Uniform on +-gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a); mode
/// "fan_in" or "fan_out".
Tensor kaiming_uniform_(Tensor tensor, double a = 0.0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu",
                        std::optional<Generator> generator = std::nullopt);
/// Normal with std gain / sqrt(fan).
Tensor kaiming_normal_(Tensor tensor, double a = 0.0, const std::string& mode = "fan_in",
                       const std::string& nonlinearity = "leaky_relu",
                       std::optional<Generator> generator = std::nullopt);
/// Uniform on +-gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor tensor, double gain = 1.0, std::optional<Generator> generator = std::nullopt);
/// Normal with std gain * sqrt(2 / (fan_in + fan_out)).
Tensor xavier_normal_(Tensor tensor, double gain = 1.0, std::optional<Generator> generator = std::nullopt);

}  // namespace ember::nn::init
