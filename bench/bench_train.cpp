// Training steps (zero_grad, forward, cross-entropy, backward, Adam step) on the cpu, batch
// 64, for examples/train's CNN and an MLP, and (transformer_step) examples/charlm's
// character model (4 pre-norm layers, width 128, 4 heads, context 128, batch 8, AdamW after
// clip_grad_norm_), with LibTorch (CPU) timed side by side in the same run. The summary
// gives ember / torch per step (below 1: ember is faster). The recurrent entries (wordlm_step,
// lstm_forward_backward, lstm_packed) are in wordlm_bench.h.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "../examples/charlm_model.h"
#include "ember/data.h"
#include "ember/ember.h"
#include "peer_ratio_reporter.h"
#include "wordlm_bench.h"

#if EMBER_BENCH_WITH_TORCH
#include <torch/torch.h>
#endif

namespace {

constexpr int64_t kBatch = 64;

using ModuleList = std::initializer_list<std::shared_ptr<ember::nn::Module>>;

std::shared_ptr<ember::nn::Sequential> ember_cnn() {
  using namespace ember::nn;
  return std::make_shared<Sequential>(
      ModuleList{std::make_shared<Conv2d>(1, 16, 3, 1, 1), std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2),
                 std::make_shared<Conv2d>(16, 32, 3, 1, 1), std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2),
                 std::make_shared<Flatten>(), std::make_shared<Linear>(32 * 7 * 7, 128), std::make_shared<ReLU>(),
                 std::make_shared<Dropout>(0.25), std::make_shared<Linear>(128, 10)});
}

std::shared_ptr<ember::nn::Sequential> ember_mlp() {
  using namespace ember::nn;
  return std::make_shared<Sequential>(ModuleList{std::make_shared<Flatten>(), std::make_shared<Linear>(784, 256),
                                                 std::make_shared<ReLU>(), std::make_shared<Linear>(256, 128),
                                                 std::make_shared<ReLU>(), std::make_shared<Linear>(128, 10)});
}

void ember_train_steps(benchmark::State& state, const std::shared_ptr<ember::nn::Sequential>& net) {
  ember::manual_seed(0);
  ember::optim::Adam adam(net->parameters(), ember::optim::AdamOptions(1e-3));
  ember::Tensor x = ember::rand({kBatch, 1, 28, 28});
  std::vector<int64_t> labels(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) labels[static_cast<size_t>(i)] = i % 10;
  ember::Tensor y = ember::tensor(labels);
  for (auto _ : state) {
    adam.zero_grad();
    ember::Tensor loss = ember::nn::functional::cross_entropy((*net)(x), y);
    loss.backward();
    adam.step();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void ember_cnn_step(benchmark::State& state) { ember_train_steps(state, ember_cnn()); }
void ember_mlp_step(benchmark::State& state) { ember_train_steps(state, ember_mlp()); }

// The character model: vocabulary 96, context 128, batch 8; dropout 0.1 as in training.
constexpr int64_t kVocab = 96, kContext = 128, kWidth = 128, kLayers = 4, kHeads = 4, kLmBatch = 8;

void ember_transformer_step(benchmark::State& state) {
  ember::manual_seed(0);
  charlm::Config config;
  config.vocab_size = kVocab;
  auto net = std::make_shared<charlm::CharLM>(config);
  auto [decay, no_decay] = charlm::decay_groups(*net);
  ember::optim::AdamW adamw(decay, ember::optim::AdamWOptions(1e-3).weight_decay(0.1));
  adamw.add_param_group(no_decay, ember::optim::AdamWOptions(1e-3).weight_decay(0.0));
  ember::Tensor x = (ember::rand({kLmBatch, kContext}) * kVocab).to(ember::kInt64);
  ember::Tensor y = (ember::rand({kLmBatch, kContext}) * kVocab).to(ember::kInt64);
  for (auto _ : state) {
    adamw.zero_grad();
    ember::Tensor logits = net->forward(x);
    ember::Tensor loss = ember::nn::functional::cross_entropy(logits.reshape({-1, kVocab}), y.reshape({-1}));
    loss.backward();
    ember::nn::utils::clip_grad_norm_(net->parameters(), 1.0);
    adamw.step();
  }
  state.SetItemsProcessed(state.iterations() * kLmBatch * kContext);
}

#if EMBER_BENCH_WITH_TORCH
void torch_train_steps(benchmark::State& state, torch::nn::Sequential net) {
  torch::manual_seed(0);
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3));
  torch::Tensor x = torch::rand({kBatch, 1, 28, 28});
  torch::Tensor y = torch::arange(kBatch, torch::kLong) % 10;
  for (auto _ : state) {
    adam.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    adam.step();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void torch_cnn_step(benchmark::State& state) {
  namespace tnn = torch::nn;
  torch_train_steps(
      state,
      tnn::Sequential(tnn::Conv2d(tnn::Conv2dOptions(1, 16, 3).padding(1)), tnn::ReLU(),
                      tnn::MaxPool2d(tnn::MaxPool2dOptions(2)), tnn::Conv2d(tnn::Conv2dOptions(16, 32, 3).padding(1)),
                      tnn::ReLU(), tnn::MaxPool2d(tnn::MaxPool2dOptions(2)), tnn::Flatten(),
                      tnn::Linear(32 * 7 * 7, 128), tnn::ReLU(), tnn::Dropout(0.25), tnn::Linear(128, 10)));
}

// The same model from LibTorch's modules (its C++ TransformerEncoderLayer has no
// norm_first, so the pre-norm block is spelled out; MultiheadAttention is sequence-first).
struct TorchBlock : torch::nn::Module {
  TorchBlock()
      : norm1(register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kWidth})))),
        self_attn(register_module("self_attn", torch::nn::MultiheadAttention(
                                                   torch::nn::MultiheadAttentionOptions(kWidth, kHeads).dropout(0.1)))),
        norm2(register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kWidth})))),
        linear1(register_module("linear1", torch::nn::Linear(kWidth, 4 * kWidth))),
        linear2(register_module("linear2", torch::nn::Linear(4 * kWidth, kWidth))),
        dropout(register_module("dropout", torch::nn::Dropout(0.1))) {}
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& mask) {  // x [T, N, E]
    torch::Tensor h = norm1(x);
    x = x + dropout(std::get<0>(self_attn->forward(h, h, h, torch::Tensor(), /*need_weights=*/false, mask)));
    return x + dropout(linear2(dropout(torch::gelu(linear1(norm2(x))))));
  }
  torch::nn::LayerNorm norm1;
  torch::nn::MultiheadAttention self_attn;
  torch::nn::LayerNorm norm2;
  torch::nn::Linear linear1, linear2;
  torch::nn::Dropout dropout;
};

struct TorchCharLM : torch::nn::Module {
  TorchCharLM()
      : wte(register_module("wte", torch::nn::Embedding(kVocab, kWidth))),
        wpe(register_module("wpe", torch::nn::Embedding(kContext, kWidth))),
        ln_f(register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kWidth})))),
        lm_head(register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(kWidth, kVocab).bias(false)))) {
    for (int64_t i = 0; i < kLayers; ++i)
      blocks.push_back(register_module("h" + std::to_string(i), std::make_shared<TorchBlock>()));
    lm_head->weight = wte->weight;  // tied
  }
  torch::Tensor forward(const torch::Tensor& idx) {
    const int64_t t = idx.size(1);
    torch::Tensor x = torch::dropout(wte(idx) + wpe(torch::arange(t)), 0.1, is_training()).transpose(0, 1);
    torch::Tensor mask = torch::ones({t, t}, torch::kBool).triu(1);
    for (auto& block : blocks) x = block->forward(x, mask);
    return lm_head(ln_f(x.transpose(0, 1)));
  }
  torch::nn::Embedding wte, wpe;
  std::vector<std::shared_ptr<TorchBlock>> blocks;
  torch::nn::LayerNorm ln_f;
  torch::nn::Linear lm_head;
};

void torch_transformer_step(benchmark::State& state) {
  torch::manual_seed(0);
  auto net = std::make_shared<TorchCharLM>();
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& item : net->named_parameters()) {
    const bool embedding = item.key().find("wte") != std::string::npos || item.key().find("wpe") != std::string::npos;
    (item.value().dim() >= 2 && !embedding ? decay : no_decay).push_back(item.value());
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay,
                      std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-3).weight_decay(0.1)));
  groups.emplace_back(no_decay,
                      std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-3).weight_decay(0.0)));
  torch::optim::AdamW adamw(std::move(groups));
  torch::Tensor x = torch::randint(kVocab, {kLmBatch, kContext});
  torch::Tensor y = torch::randint(kVocab, {kLmBatch, kContext});
  for (auto _ : state) {
    adamw.zero_grad();
    torch::Tensor logits = net->forward(x);
    torch::Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, kVocab}), y.reshape({-1}));
    loss.backward();
    torch::nn::utils::clip_grad_norm_(net->parameters(), 1.0);
    adamw.step();
  }
  state.SetItemsProcessed(state.iterations() * kLmBatch * kContext);
}

void torch_mlp_step(benchmark::State& state) {
  namespace tnn = torch::nn;
  torch_train_steps(state, tnn::Sequential(tnn::Flatten(), tnn::Linear(784, 256), tnn::ReLU(), tnn::Linear(256, 128),
                                           tnn::ReLU(), tnn::Linear(128, 10)));
}
#endif

}  // namespace

BENCHMARK(ember_cnn_step)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(ember_mlp_step)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(ember_transformer_step)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(wordlm_bench::ember_wordlm_step)->Name("ember_wordlm_step")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(wordlm_bench::ember_lstm_forward_backward)
    ->Name("ember_lstm_forward_backward")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(wordlm_bench::ember_lstm_packed)->Name("ember_lstm_packed")->Unit(benchmark::kMillisecond)->UseRealTime();
#if EMBER_BENCH_WITH_TORCH
BENCHMARK(torch_cnn_step)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(torch_mlp_step)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(torch_transformer_step)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(wordlm_bench::torch_wordlm_step)->Name("torch_wordlm_step")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(wordlm_bench::torch_lstm_forward_backward)
    ->Name("torch_lstm_forward_backward")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(wordlm_bench::torch_lstm_packed)->Name("torch_lstm_packed")->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;  // as BENCHMARK_MAIN does
  PeerRatioReporter reporter("ember / torch per training step (real time; < 1 means ember is faster)");
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
