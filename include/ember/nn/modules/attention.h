// nn::MultiheadAttention (torch.nn.MultiheadAttention).
#pragma once

#include <utility>

#include "ember/nn/module.h"
#include "ember/nn/modules/linear.h"

namespace ember::nn {

/// Attention over num_heads heads of embed_dim / num_heads each, as PyTorch's: one packed
/// input projection (in_proj_weight [3E, E], in_proj_bias [3E]) and out_proj (Linear(E, E)),
/// so state dicts load from and into PyTorch's. in_proj_weight starts xavier-uniform and the
/// biases zero, as PyTorch's _reset_parameters.
class MultiheadAttention : public Module {
 public:
  /// ValueError "embed_dim must be divisible by num_heads" (PyTorch's assertion), or for a
  /// non-positive size or a dropout outside [0, 1].
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     bool batch_first = false);

  /// query [L, N, E] (batch_first: [N, L, E]; unbatched: [L, E]), key and value [S, N, E]
  /// (likewise). Returns the output, shaped as the query, and, with need_weights, the attention
  /// weights [N, L, S] averaged over the heads (average_attn_weights) or [N, num_heads, L, S]
  /// (undefined without need_weights).
  /// attn_mask: [L, S] or [N * num_heads, L, S]; key_padding_mask: [N, S]. A bool mask is true
  /// where attention is not allowed; a floating mask is added to the scores. A mask of another
  /// shape is a ValueError with PyTorch's message; of another dtype, a TypeError.
  /// is_causal: as in PyTorch, a hint that attn_mask is the causal mask; without an attn_mask
  /// (where PyTorch raises) the causal mask is made here: position i attends to positions <= i.
  std::pair<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& key_padding_mask = {}, bool need_weights = true,
                                    const Tensor& attn_mask = {}, bool average_attn_weights = true,
                                    bool is_causal = false);
  /// Self-attention: forward(x, x, x) without weights, its output alone.
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<Module> clone() const override;
  /// Re-draws in_proj_weight (xavier-uniform) and zeroes the biases.
  void reset_parameters();

  int64_t embed_dim, num_heads, head_dim;
  double dropout;
  bool batch_first;
  Tensor in_proj_weight, in_proj_bias;  // in_proj_bias undefined without bias
  std::shared_ptr<Linear> out_proj;

 protected:
  void rebind_members(const MemberRemap& remap) override;
};

}  // namespace ember::nn
