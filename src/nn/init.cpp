// nn::init: torch.nn.init's formulas over ember's random fills.
#include "ember/nn/init.h"

#include <cmath>

#include "ember/autograd.h"
#include "ember/errors.h"

namespace ember::nn::init {
namespace {

int64_t fan(const Tensor& tensor, const std::string& mode) {
  EMBER_CHECK(mode == "fan_in" || mode == "fan_out", ValueError, "Mode ", mode,
              " not supported, please use one of fan_in, fan_out");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  return mode == "fan_in" ? fan_in : fan_out;
}

void check_defined(const Tensor& tensor, const char* fn) {
  EMBER_CHECK(tensor.defined(), ValueError, "nn::init::", fn, ": the tensor is undefined");
}

}  // namespace

Tensor uniform_(Tensor tensor, double a, double b, std::optional<Generator> generator) {
  check_defined(tensor, "uniform_");
  NoGradGuard no_grad;
  tensor.uniform_(a, b, std::move(generator));
  return tensor;
}

Tensor normal_(Tensor tensor, double mean, double std, std::optional<Generator> generator) {
  check_defined(tensor, "normal_");
  NoGradGuard no_grad;
  tensor.normal_(mean, std, std::move(generator));
  return tensor;
}

Tensor constant_(Tensor tensor, const Scalar& value) {
  check_defined(tensor, "constant_");
  NoGradGuard no_grad;
  tensor.fill_(value);
  return tensor;
}

Tensor zeros_(Tensor tensor) { return constant_(std::move(tensor), 0); }
Tensor ones_(Tensor tensor) { return constant_(std::move(tensor), 1); }

double calculate_gain(const std::string& nonlinearity, std::optional<double> param) {
  static const char* kLinear[] = {"linear",           "conv1d",           "conv2d",           "conv3d",
                                  "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "sigmoid"};
  for (const char* name : kLinear) {
    if (nonlinearity == name) return 1.0;
  }
  if (nonlinearity == "tanh") return 5.0 / 3;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    const double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1 + slope * slope));
  }
  if (nonlinearity == "selu") return 3.0 / 4;
  detail::fail<ValueError>("Unsupported nonlinearity ", nonlinearity);
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor) {
  check_defined(tensor, "calculate_fan_in_and_fan_out");
  EMBER_CHECK(tensor.dim() >= 2, ValueError,
              "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
  int64_t receptive_field = 1;
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive_field *= tensor.size(d);
  return {tensor.size(1) * receptive_field, tensor.size(0) * receptive_field};
}

Tensor kaiming_uniform_(Tensor tensor, double a, const std::string& mode, const std::string& nonlinearity,
                        std::optional<Generator> generator) {
  check_defined(tensor, "kaiming_uniform_");
  if (tensor.numel() == 0) return tensor;  // PyTorch: "Initializing zero-element tensors is a no-op"
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan(tensor, mode)));
  const double bound = std::sqrt(3.0) * std;
  return uniform_(std::move(tensor), -bound, bound, std::move(generator));
}

Tensor kaiming_normal_(Tensor tensor, double a, const std::string& mode, const std::string& nonlinearity,
                       std::optional<Generator> generator) {
  check_defined(tensor, "kaiming_normal_");
  if (tensor.numel() == 0) return tensor;
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan(tensor, mode)));
  return normal_(std::move(tensor), 0, std, std::move(generator));
}

Tensor xavier_uniform_(Tensor tensor, double gain, std::optional<Generator> generator) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  if (tensor.numel() == 0) return tensor;
  const double std = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  const double bound = std::sqrt(3.0) * std;
  return uniform_(std::move(tensor), -bound, bound, std::move(generator));
}

Tensor xavier_normal_(Tensor tensor, double gain, std::optional<Generator> generator) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  if (tensor.numel() == 0) return tensor;
  return normal_(std::move(tensor), 0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)),
                 std::move(generator));
}

}  // namespace ember::nn::init
