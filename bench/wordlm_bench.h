// bench_train's recurrent entries: the classic word-level language model's training step
// (examples/wordlm's model: Embedding 10000 x 200, dropout 0.2, LSTM 200 -> 200 of 2 layers
// with dropout 0.2 between them, dropout, Linear 200 -> 10000; bptt 35, batch 20; the hidden
// state carried over detached; clip_grad_norm_ 0.25 and SGD lr 20, as pytorch/examples'
// word_language_model), and an LSTM's forward and backward alone (the same LSTM, its output
// summed), each beside LibTorch's torch::nn::LSTM in the same run; and the same LSTM on a packed
// batch of the lengths 35, 34, ..., 16 (lstm_packed: compare with lstm_forward_backward, the
// padded batch of the longest length, and with LibTorch's packed path).
#pragma once

#include <benchmark/benchmark.h>

#include "ember/ember.h"

#if EMBER_BENCH_WITH_TORCH
#include <torch/torch.h>
#endif

namespace wordlm_bench {

constexpr int64_t kTokens = 10000, kWidth = 200, kLayers = 2, kBptt = 35, kBatch = 20;
constexpr double kDropout = 0.2, kClip = 0.25, kLr = 20.0;

inline void ember_wordlm_step(benchmark::State& state) {
  using namespace ember;
  manual_seed(0);
  auto encoder = std::make_shared<nn::Embedding>(kTokens, kWidth);
  auto rnn = std::make_shared<nn::LSTM>(kWidth, kWidth, kLayers, true, false, kDropout);
  auto decoder = std::make_shared<nn::Linear>(kWidth, kTokens);
  nn::Dropout drop(kDropout);
  std::vector<Tensor> params = encoder->parameters();
  for (const auto& m : std::vector<std::shared_ptr<nn::Module>>{rnn, decoder}) {
    for (const Tensor& p : m->parameters()) params.push_back(p);
  }
  optim::SGD sgd(params, optim::SGDOptions(kLr));
  Tensor x = (rand({kBptt, kBatch}) * kTokens).to(kInt64), y = (rand({kBptt * kBatch}) * kTokens).to(kInt64);
  Tensor weight = rnn->weights(0, 0)[0];
  std::pair<Tensor, Tensor> hidden{weight.new_zeros({kLayers, kBatch, kWidth}),
                                   weight.new_zeros({kLayers, kBatch, kWidth})};
  for (auto _ : state) {
    sgd.zero_grad();
    auto [out, next] =
        rnn->forward(drop(encoder->forward(x)), std::make_pair(hidden.first.detach(), hidden.second.detach()));
    hidden = next;
    Tensor logits = decoder->forward(drop(out)).reshape({-1, kTokens});
    Tensor loss = nn::functional::cross_entropy(logits, y);
    loss.backward();
    nn::utils::clip_grad_norm_(params, kClip);
    sgd.step();
  }
  state.SetItemsProcessed(state.iterations() * kBptt * kBatch);
}

inline void ember_lstm_forward_backward(benchmark::State& state) {
  using namespace ember;
  manual_seed(0);
  nn::LSTM rnn(kWidth, kWidth, kLayers);
  Tensor x = randn({kBptt, kBatch, kWidth}).requires_grad_(true);
  for (auto _ : state) {
    rnn.zero_grad();
    x.mutable_grad() = Tensor();
    rnn.forward(x).first.sum().backward();
  }
  state.SetItemsProcessed(state.iterations() * kBptt * kBatch);
}

// Lengths kBptt, kBptt - 1, ...: a batch of mixed lengths, sorted as packing wants.
inline std::vector<int64_t> mixed_lengths() {
  std::vector<int64_t> lengths;
  for (int64_t b = 0; b < kBatch; ++b) lengths.push_back(kBptt - b);
  return lengths;
}

inline void ember_lstm_packed(benchmark::State& state) {
  using namespace ember;
  manual_seed(0);
  nn::LSTM rnn(kWidth, kWidth, kLayers);
  Tensor x = randn({kBptt, kBatch, kWidth}).requires_grad_(true);
  const std::vector<int64_t> lengths = mixed_lengths();
  for (auto _ : state) {
    rnn.zero_grad();
    x.mutable_grad() = Tensor();
    rnn.forward(nn::utils::rnn::pack_padded_sequence(x, lengths)).first.data().sum().backward();
  }
  state.SetItemsProcessed(state.iterations() * kBptt * kBatch);
}

#if EMBER_BENCH_WITH_TORCH
inline void torch_lstm_packed(benchmark::State& state) {
  torch::manual_seed(0);
  torch::nn::LSTM rnn(torch::nn::LSTMOptions(kWidth, kWidth).num_layers(kLayers));
  torch::Tensor x = torch::randn({kBptt, kBatch, kWidth}).requires_grad_(true);
  const std::vector<int64_t> lengths = mixed_lengths();
  const torch::Tensor lengths_tensor = torch::tensor(lengths);
  for (auto _ : state) {
    rnn->zero_grad();
    x.mutable_grad() = torch::Tensor();
    std::get<0>(rnn->forward_with_packed_input(torch::nn::utils::rnn::pack_padded_sequence(x, lengths_tensor)))
        .data()
        .sum()
        .backward();
  }
  state.SetItemsProcessed(state.iterations() * kBptt * kBatch);
}

inline void torch_wordlm_step(benchmark::State& state) {
  namespace tnn = torch::nn;
  torch::manual_seed(0);
  tnn::Embedding encoder(kTokens, kWidth);
  tnn::LSTM rnn(tnn::LSTMOptions(kWidth, kWidth).num_layers(kLayers).dropout(kDropout));
  tnn::Linear decoder(kWidth, kTokens);
  tnn::Dropout drop(kDropout);
  std::vector<torch::Tensor> params = encoder->parameters();
  for (const auto& p : rnn->parameters()) params.push_back(p);
  for (const auto& p : decoder->parameters()) params.push_back(p);
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(kLr));
  torch::Tensor x = torch::randint(kTokens, {kBptt, kBatch}), y = torch::randint(kTokens, {kBptt * kBatch});
  std::tuple<torch::Tensor, torch::Tensor> hidden{torch::zeros({kLayers, kBatch, kWidth}),
                                                  torch::zeros({kLayers, kBatch, kWidth})};
  for (auto _ : state) {
    sgd.zero_grad();
    auto [out, next] =
        rnn->forward(drop(encoder(x)), std::make_tuple(std::get<0>(hidden).detach(), std::get<1>(hidden).detach()));
    hidden = next;
    torch::Tensor logits = decoder(drop(out)).reshape({-1, kTokens});
    torch::Tensor loss = torch::nn::functional::cross_entropy(logits, y);
    loss.backward();
    torch::nn::utils::clip_grad_norm_(params, kClip);
    sgd.step();
  }
  state.SetItemsProcessed(state.iterations() * kBptt * kBatch);
}

inline void torch_lstm_forward_backward(benchmark::State& state) {
  torch::manual_seed(0);
  torch::nn::LSTM rnn(torch::nn::LSTMOptions(kWidth, kWidth).num_layers(kLayers));
  torch::Tensor x = torch::randn({kBptt, kBatch, kWidth}).requires_grad_(true);
  for (auto _ : state) {
    rnn->zero_grad();
    x.mutable_grad() = torch::Tensor();
    std::get<0>(rnn->forward(x)).sum().backward();
  }
  state.SetItemsProcessed(state.iterations() * kBptt * kBatch);
}
#endif

}  // namespace wordlm_bench
