// nn::TransformerEncoderLayer (torch.nn.TransformerEncoderLayer).
#pragma once

#include <memory>
#include <string>

#include "ember/nn/module.h"
#include "ember/nn/modules/attention.h"
#include "ember/nn/modules/dropout.h"
#include "ember/nn/modules/linear.h"
#include "ember/nn/modules/normalization.h"

namespace ember::nn {

/// Self-attention and a feed-forward block, each with dropout and a residual connection,
/// as PyTorch's: post-norm x = norm1(x + sa(x)); x = norm2(x + ff(x)), or with norm_first
/// x = x + sa(norm1(x)); x = x + ff(norm2(x)); ff(x) = linear2(dropout(activation(linear1(x)))).
/// Children (and so state-dict keys) are PyTorch's: self_attn, linear1, dropout, linear2,
/// norm1, norm2, dropout1, dropout2.
class TransformerEncoderLayer : public Module {
 public:
  /// activation "relu" or "gelu" (ValueError "activation should be relu/gelu, not ...").
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward = 2048, double dropout = 0.1,
                          std::string activation = "relu", double layer_norm_eps = 1e-5, bool batch_first = false,
                          bool norm_first = false);
  /// src [S, N, E] (batch_first: [N, S, E]; unbatched [S, E]); src_mask and
  /// src_key_padding_mask as MultiheadAttention's attn_mask and key_padding_mask; is_causal
  /// as MultiheadAttention's.
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask = {},
                 bool is_causal = false);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }
  std::shared_ptr<Module> clone() const override;

  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::string activation;
  bool norm_first;

 protected:
  void rebind_members(const MemberRemap& remap) override;

 private:
  int64_t dim_feedforward_;
  double dropout_p_, layer_norm_eps_;
  bool batch_first_;
};

}  // namespace ember::nn
