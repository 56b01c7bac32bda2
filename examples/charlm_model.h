// The character model of examples/charlm: a GPT-style decoder built from ember::nn's
// modules under nanoGPT's names (transformer.wte, transformer.h.0.self_attn..., lm_head),
// so that the same model written with torch.nn loads its state dict (tests/test_transformer
// and bench/charlm_pytorch.py build it so).
#pragma once

#include <memory>
#include <vector>

#include "ember/ember.h"

namespace charlm {

struct Config {
  int64_t vocab_size = 0;
  int64_t context = 128;
  int64_t width = 128;
  int64_t layers = 4;
  int64_t heads = 4;
  double dropout = 0.1;
};

/// Token and position embeddings, `layers` pre-norm TransformerEncoderLayers (GELU, 4x wide
/// feed-forward, causal self-attention), a final LayerNorm and an output projection tied to
/// the token embedding. Linear and embedding weights start N(0, 0.02), biases zero
/// (in_proj_weight keeps MultiheadAttention's xavier-uniform).
class CharLM : public ember::nn::Module {
 public:
  explicit CharLM(const Config& config) : config_(config) {
    using namespace ember;
    auto dict = register_module("transformer", std::make_shared<nn::ModuleDict>());
    wte = std::static_pointer_cast<nn::Embedding>(
        dict->insert("wte", std::make_shared<nn::Embedding>(config.vocab_size, config.width)));
    wpe = std::static_pointer_cast<nn::Embedding>(
        dict->insert("wpe", std::make_shared<nn::Embedding>(config.context, config.width)));
    drop = std::static_pointer_cast<nn::Dropout>(dict->insert("drop", std::make_shared<nn::Dropout>(config.dropout)));
    auto h = std::static_pointer_cast<nn::ModuleList>(dict->insert("h", std::make_shared<nn::ModuleList>()));
    for (int64_t i = 0; i < config.layers; ++i) {
      blocks.push_back(std::make_shared<nn::TransformerEncoderLayer>(config.width, config.heads, 4 * config.width,
                                                                     config.dropout, "gelu", 1e-5, /*batch_first=*/true,
                                                                     /*norm_first=*/true));
      h->push_back(blocks.back());
    }
    ln_f = std::static_pointer_cast<nn::LayerNorm>(
        dict->insert("ln_f", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{config.width})));
    lm_head = register_module("lm_head", std::make_shared<nn::Linear>(config.width, config.vocab_size, false));
    lm_head->weight = lm_head->register_parameter("weight", wte->weight);  // tied: lm_head.weight = wte.weight
    apply([](nn::Module& m) {
      if (auto* linear = dynamic_cast<nn::Linear*>(&m)) {
        nn::init::normal_(linear->weight, 0.0, 0.02);
        if (linear->bias.defined()) nn::init::zeros_(linear->bias);
      } else if (auto* embedding = dynamic_cast<nn::Embedding*>(&m)) {
        nn::init::normal_(embedding->weight, 0.0, 0.02);
      }
    });
  }

  /// Token ids [N, T] (T <= context) -> next-token logits [N, T, vocab_size].
  ember::Tensor forward(const ember::Tensor& idx) override {
    using namespace ember;
    EMBER_CHECK(idx.dim() == 2, ValueError, "CharLM: expected token ids [batch, time], got ", idx.dim(), " dims");
    const int64_t t = idx.size(1);
    EMBER_CHECK(t <= config_.context, ValueError, "CharLM: cannot forward a sequence of length ", t,
                ", the context is only ", config_.context);
    const TensorOptions on(idx.device());
    Tensor x = drop->forward(wte->forward(idx) + wpe->forward(arange(t, on.dtype(kInt64))));
    const Tensor causal = arange(t, on).unsqueeze(0).gt(arange(t, on).unsqueeze(1));  // true above the diagonal
    for (const auto& block : blocks) x = block->forward(x, causal, {}, /*is_causal=*/true);
    return lm_head->forward(ln_f->forward(x));
  }

  /// A copy with its own tensors, tied as this model's (DataParallel's replicas).
  std::shared_ptr<ember::nn::Module> clone() const override {
    auto copy = std::make_shared<CharLM>(config_);
    copy->to(wte->weight.device(), wte->weight.dtype());
    copy->load_state_dict(state_dict());
    const auto originals = modules(), copies = copy->modules();
    for (size_t i = 0; i < originals.size(); ++i) copies[i]->train(originals[i]->is_training());
    return copy;
  }

  const Config& config() const noexcept { return config_; }

  std::shared_ptr<ember::nn::Embedding> wte, wpe;
  std::shared_ptr<ember::nn::Dropout> drop;
  std::vector<std::shared_ptr<ember::nn::TransformerEncoderLayer>> blocks;
  std::shared_ptr<ember::nn::LayerNorm> ln_f;
  std::shared_ptr<ember::nn::Linear> lm_head;

 private:
  Config config_;
};

/// AdamW's two parameter groups, as nanoGPT's: matrices (Linear weights, in_proj_weight)
/// decay; biases, norms and embeddings (with the tied output projection) do not.
inline std::pair<std::vector<ember::Tensor>, std::vector<ember::Tensor>> decay_groups(const CharLM& model) {
  std::vector<ember::Tensor> decay, no_decay;
  for (const auto& [name, p] : model.named_parameters()) {
    const bool embedding = name.find("wte") != std::string::npos || name.find("wpe") != std::string::npos;
    (p.dim() >= 2 && !embedding ? decay : no_decay).push_back(p);
  }
  return {decay, no_decay};
}

/// Draws `length` tokens after `prompt` ([1, T0] int64), one at a time from the softmax of
/// the last logits / temperature, restricted to the top_k most likely (0: all).
inline ember::Tensor generate(CharLM& model, ember::Tensor prompt, int64_t length, double temperature, int64_t top_k) {
  using namespace ember;
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  Tensor idx = prompt;
  for (int64_t i = 0; i < length; ++i) {
    const int64_t t = idx.size(1);
    Tensor window = t > model.config().context ? idx.slice(1, t - model.config().context, t) : idx;
    Tensor logits = model.forward(window).select(1, window.size(1) - 1) / temperature;  // [1, vocab]
    if (top_k > 0 && top_k < logits.size(-1)) {
      auto [values, indices] = logits.topk(top_k);
      Tensor kth = values.select(1, top_k - 1).unsqueeze(1);
      logits = logits.masked_fill(logits.lt(kth), -std::numeric_limits<double>::infinity());
    }
    Tensor next = multinomial(logits.softmax(-1), 1);  // [1, 1]
    idx = cat({idx, next}, 1);
  }
  model.train(was_training);
  return idx;
}

}  // namespace charlm
