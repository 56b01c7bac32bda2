#include "ember/nn/modules/transformer.h"

#include "ember/nn.h"
#include "ember/ops.h"
#include "nn/copy_module.h"

namespace ember::nn {

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                                 double dropout_p, std::string activation, double layer_norm_eps,
                                                 bool batch_first, bool norm_first)
    : activation(std::move(activation)),
      norm_first(norm_first),
      dim_feedforward_(dim_feedforward),
      dropout_p_(dropout_p),
      layer_norm_eps_(layer_norm_eps),
      batch_first_(batch_first) {
  EMBER_CHECK(this->activation == "relu" || this->activation == "gelu", ValueError,
              "activation should be relu/gelu, not ", this->activation);
  self_attn =
      register_module("self_attn", std::make_shared<MultiheadAttention>(d_model, nhead, dropout_p, true, batch_first));
  linear1 = register_module("linear1", std::make_shared<Linear>(d_model, dim_feedforward));
  dropout = register_module("dropout", std::make_shared<Dropout>(dropout_p));
  linear2 = register_module("linear2", std::make_shared<Linear>(dim_feedforward, d_model));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(std::vector<int64_t>{d_model}, layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(std::vector<int64_t>{d_model}, layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(dropout_p));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(dropout_p));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask,
                                        bool is_causal) {
  auto sa_block = [&](const Tensor& x) {
    return dropout1->forward(
        self_attn->forward(x, x, x, src_key_padding_mask, /*need_weights=*/false, src_mask, true, is_causal).first);
  };
  auto ff_block = [&](const Tensor& x) {
    Tensor h = linear1->forward(x);
    h = activation == "gelu" ? functional::gelu(h) : relu(h);
    return dropout2->forward(linear2->forward(dropout->forward(h)));
  };
  Tensor x = src;
  if (norm_first) {
    x = x + sa_block(norm1->forward(x));
    x = x + ff_block(norm2->forward(x));
  } else {
    x = norm1->forward(x + sa_block(x));
    x = norm2->forward(x + ff_block(x));
  }
  return x;
}

std::shared_ptr<Module> TransformerEncoderLayer::clone() const {
  return detail::nn::clone_as(*this, [&] {
    return std::make_shared<TransformerEncoderLayer>(self_attn->embed_dim, self_attn->num_heads, dim_feedforward_,
                                                     dropout_p_, activation, layer_norm_eps_, batch_first_, norm_first);
  });
}

void TransformerEncoderLayer::rebind_members(const MemberRemap& remap) {
  remap(self_attn);
  remap(linear1);
  remap(linear2);
  remap(dropout);
  remap(dropout1);
  remap(dropout2);
  remap(norm1);
  remap(norm2);
}

}  // namespace ember::nn
