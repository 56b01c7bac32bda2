// torch.nn.functional's core ops (and conv2d): the functional half of nn, below its modules.
// Ops and autograd include this header, never <ember/nn.h>, which adds every module.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "ember/generator.h"
#include "ember/nn/functional/conv.h"  // conv2d's other overloads, for the using-declaration below
#include "ember/tensor.h"

namespace ember {

/// 2-D convolution (NCHW input, OIHW weight), as torch.nn.functional.conv2d. bias may be
/// undefined. Float32 convolutions round inputs to TF32 when backends::cudnn.allow_tf32.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, const IntList& stride = {1, 1},
              const IntList& padding = {0, 0}, const IntList& dilation = {1, 1}, int64_t groups = 1);

/// torch.nn.functional, forward only: sizes given as one value (both dims) or two; an
/// empty pooling stride means the kernel size. `reduction` is "none", "mean" or "sum".
namespace nn::functional {

using ember::conv2d;

/// input @ weight.T + bias; bias may be undefined.
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = {});
Tensor relu(const Tensor& input);
/// Max pooling over (N, C, H, W) or (C, H, W) input.
Tensor max_pool2d(const Tensor& input, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, const IntList& dilation = {1}, bool ceil_mode = false);
/// Max pooling and, for each output, the flat index (h * W + w) of its input element (int64).
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, const IntList& kernel_size,
                                                   const IntList& stride = {}, const IntList& padding = {0},
                                                   const IntList& dilation = {1}, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& input, const IntList& kernel_size, const IntList& stride = {},
                  const IntList& padding = {0}, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
/// Zeroes elements with probability p (a Philox mask: the same on every backend for the
/// same seed) and scales the rest by 1 / (1 - p); the input itself when !training.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true,
               std::optional<Generator> generator = std::nullopt);
/// Batch normalisation over dim 1 of (N, C, ...) input. Training uses the batch statistics
/// and updates defined running stats in place with `momentum` (unbiased variance), as PyTorch.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight = {},
                  const Tensor& bias = {}, bool training = false, double momentum = 0.1, double eps = 1e-5);
/// Class-index targets (int64, (N) or (N, d...)) or class probabilities (input's shape).
Tensor cross_entropy(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                     int64_t ignore_index = -100, double label_smoothing = 0.0);
Tensor nll_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                int64_t ignore_index = -100);
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
/// int64 one-hot encoding along a new last dim; num_classes -1 means max(labels) + 1.
Tensor one_hot(const Tensor& labels, int64_t num_classes = -1);

// Transformer building blocks.
/// Rows of weight {num_embeddings, dim} picked by int64 (or int32) indices of any shape:
/// out has indices' shape + {dim}. Rows at padding_idx get no gradient; the backward
/// is a deterministic index-add.
Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx = std::nullopt);
/// Normalises over the last normalized_shape.size() dims (biased variance), then scales
/// and shifts by weight and bias (each normalized_shape, either may be undefined).
Tensor layer_norm(const Tensor& input, const IntList& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
/// x * Phi(x); approximate "tanh" uses PyTorch's tanh approximation.
Tensor gelu(const Tensor& input, const std::string& approximate = "none");
/// softmax(q @ k^T * scale + mask) @ v with dropout on the weights (PyTorch's math path):
/// q [..., L, E], k [..., S, E], v [..., S, Ev]; attn_mask bool (true attends) or float
/// (added), broadcastable to [..., L, S]; is_causal masks j > i; scale defaults to 1/sqrt(E).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);

}  // namespace nn::functional
}  // namespace ember
