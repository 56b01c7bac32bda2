// The classic word-level language model (pytorch/examples' word_language_model RNNModel):
// Embedding -> dropout -> LSTM, GRU or RNN -> dropout -> Linear, optionally with the
// decoder's weight tied to the encoder's.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ember/ember.h"

namespace wordlm {

struct Config {
  std::string rnn_type = "LSTM";  // LSTM, GRU, RNN_TANH or RNN_RELU
  int64_t tokens = 10000, emsize = 200, nhid = 200, nlayers = 2;
  double dropout = 0.2;
  bool tied = false;
};

/// The recurrent state: {h} for RNN and GRU, {h, c} for the LSTM.
using Hidden = std::vector<ember::Tensor>;

class RNNModel : public ember::nn::Module {
 public:
  explicit RNNModel(const Config& config) : Module("RNNModel"), config_(config) {
    using namespace ember::nn;
    EMBER_CHECK(!config.tied || config.nhid == config.emsize, ValueError,
                "When using the tied flag, nhid must be equal to emsize");
    drop_ = register_module("drop", std::make_shared<Dropout>(config.dropout));
    encoder_ = register_module("encoder", std::make_shared<Embedding>(config.tokens, config.emsize));
    const int64_t in = config.emsize, hid = config.nhid, layers = config.nlayers;
    if (config.rnn_type == "LSTM") {
      rnn_ = register_module("rnn", std::make_shared<LSTM>(in, hid, layers, true, false, config.dropout));
    } else if (config.rnn_type == "GRU") {
      rnn_ = register_module("rnn", std::make_shared<GRU>(in, hid, layers, true, false, config.dropout));
    } else {
      EMBER_CHECK(
          config.rnn_type == "RNN_TANH" || config.rnn_type == "RNN_RELU", ValueError,
          "An invalid option for `--model` was supplied, options are ['LSTM', 'GRU', 'RNN_TANH' or 'RNN_RELU']");
      rnn_ =
          register_module("rnn", std::make_shared<RNN>(in, hid, layers, config.rnn_type == "RNN_TANH" ? "tanh" : "relu",
                                                       true, false, config.dropout));
    }
    decoder_ = register_module("decoder", std::make_shared<Linear>(hid, config.tokens));
    // pytorch/examples' init_weights: the recurrent layers keep their own initialisation.
    ember::nn::init::uniform_(encoder_->weight, -0.1, 0.1);
    ember::nn::init::zeros_(decoder_->bias);
    ember::nn::init::uniform_(decoder_->weight, -0.1, 0.1);
    if (config.tied) decoder_->weight = decoder_->register_parameter("weight", encoder_->weight);
  }

  /// input [T, N] token ids -> logits [T * N, tokens] and the next state.
  std::pair<ember::Tensor, Hidden> forward(const ember::Tensor& input, const Hidden& hidden) {
    ember::Tensor emb = drop_->forward(encoder_->forward(input));
    ember::Tensor out;
    Hidden next;
    if (auto* lstm = dynamic_cast<ember::nn::LSTM*>(rnn_.get())) {
      auto [o, hc] = lstm->forward(emb, std::make_pair(hidden.at(0), hidden.at(1)));
      out = o;
      next = {hc.first, hc.second};
    } else if (auto* gru = dynamic_cast<ember::nn::GRU*>(rnn_.get())) {
      auto [o, h] = gru->forward(emb, hidden.at(0));
      out = o;
      next = {h};
    } else {
      auto [o, h] = dynamic_cast<ember::nn::RNN&>(*rnn_).forward(emb, hidden.at(0));
      out = o;
      next = {h};
    }
    ember::Tensor logits = decoder_->forward(drop_->forward(out));
    return {logits.reshape({-1, config_.tokens}), next};
  }

  /// A packed batch of token sequences (each from its first word, zero initial state) ->
  /// logits [sum of lengths, tokens], the rows in the packed order.
  ember::Tensor forward(const ember::nn::utils::rnn::PackedSequence& input) {
    using ember::nn::utils::rnn::PackedSequence;
    PackedSequence emb(drop_->forward(encoder_->forward(input.data())), input.batch_sizes(), input.sorted_indices(),
                       input.unsorted_indices());
    ember::Tensor out;
    if (auto* lstm = dynamic_cast<ember::nn::LSTM*>(rnn_.get())) out = lstm->forward(emb).first.data();
    else if (auto* gru = dynamic_cast<ember::nn::GRU*>(rnn_.get())) out = gru->forward(emb).first.data();
    else out = dynamic_cast<ember::nn::RNN&>(*rnn_).forward(emb).first.data();
    return decoder_->forward(drop_->forward(out));
  }

  /// The spec's device-agnostic initial state: zeros made from a parameter (new_zeros), on
  /// the model's device and dtype.
  Hidden init_hidden(int64_t batch) const {
    const ember::Tensor weight = parameters().front();
    Hidden hidden{weight.new_zeros({config_.nlayers, batch, config_.nhid})};
    if (config_.rnn_type == "LSTM") hidden.push_back(weight.new_zeros({config_.nlayers, batch, config_.nhid}));
    return hidden;
  }

  /// The same values outside the graph (truncated back-propagation through time).
  static Hidden repackage(const Hidden& hidden) {
    Hidden out;
    for (const ember::Tensor& h : hidden) out.push_back(h.detach());
    return out;
  }

  const Config& config() const { return config_; }

  /// A copy with its own tensors, tied as this model's (DataParallel's replicas).
  std::shared_ptr<ember::nn::Module> clone() const override {
    auto copy = std::make_shared<RNNModel>(config_);
    const ember::Tensor weight = parameters().front();
    copy->to(weight.device(), weight.dtype());
    copy->load_state_dict(state_dict());
    const auto originals = modules(), copies = copy->modules();
    for (size_t i = 0; i < originals.size(); ++i) copies[i]->train(originals[i]->is_training());
    return copy;
  }

 private:
  Config config_;
  std::shared_ptr<ember::nn::Dropout> drop_;
  std::shared_ptr<ember::nn::Embedding> encoder_;
  std::shared_ptr<ember::nn::RNNBase> rnn_;
  std::shared_ptr<ember::nn::Linear> decoder_;
};

}  // namespace wordlm
