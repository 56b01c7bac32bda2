// nn::RNN, nn::LSTM, nn::GRU and the cells against PyTorch 1.13 (float64): state dicts saved
// by PyTorch load under their keys and give PyTorch's outputs and gradients, on the cpu and on
// a cuda device (emulated without a GPU). The numbers are in rnn_expected.h, made by
// rnn_expected.py (/usr/bin/python3 tests/rnn_expected.py > tests/rnn_expected.h).
// Then gradcheck of the recurrence, the modules' parameters and repr, and their errors.
#include "../examples/wordlm_model.h"
#include "nn/modules/rnn_layer.h"
#include "rnn_test_util.h"

namespace ember::testing {
namespace {

using namespace rnn_expected;
namespace rnn = nn::utils::rnn;

class Rnn : public RnnCase {};

std::string str_shape(const Tensor& t) {
  std::string out = "[";
  for (int64_t i = 0; i < t.dim(); ++i) out += (i ? ", " : "") + std::to_string(t.size(i));
  return out + "]";
}

TEST_P(Rnn, LstmWithProjectionsBidirectionalMatchesPyTorch) {
  nn::LSTM m(3, 5, 2, true, false, 0.0, true, 3);
  load(m, k_lstm_proj_bidirectional);
  Tensor x = input(k_lstm_proj_bidirectional, "x"), h0 = input(k_lstm_proj_bidirectional, "h0"),
         c0 = input(k_lstm_proj_bidirectional, "c0");
  auto [out, state] = m.forward(x, std::make_pair(h0, c0));
  expect_matches(m, k_lstm_proj_bidirectional, {{"out", out}, {"h_n", state.first}, {"c_n", state.second}},
                 {{"x", x}, {"h0", h0}, {"c0", c0}});
}

TEST_P(Rnn, GruBatchFirstFromZeroStateMatchesPyTorch) {
  nn::GRU m(3, 4, 2, true, true);
  load(m, k_gru_batch_first);
  Tensor x = input(k_gru_batch_first, "x");
  auto [out, h] = m.forward(x);
  expect_matches(m, k_gru_batch_first, {{"out", out}, {"h_n", h}}, {{"x", x}});
}

TEST_P(Rnn, ReluRnnBidirectionalMatchesPyTorch) {
  nn::RNN m(3, 4, 1, "relu", true, false, 0.0, true);
  load(m, k_rnn_relu_bidirectional);
  Tensor x = input(k_rnn_relu_bidirectional, "x"), h0 = input(k_rnn_relu_bidirectional, "h0");
  auto [out, h] = m.forward(x, h0);
  expect_matches(m, k_rnn_relu_bidirectional, {{"out", out}, {"h_n", h}}, {{"x", x}, {"h0", h0}});
}

TEST_P(Rnn, UnbatchedTanhRnnWithoutBiasMatchesPyTorch) {
  nn::RNN m(3, 4, 2, "tanh", false);
  load(m, k_rnn_tanh_unbatched);
  Tensor x = input(k_rnn_tanh_unbatched, "x"), h0 = input(k_rnn_tanh_unbatched, "h0");
  auto [out, h] = m.forward(x, h0);
  expect_matches(m, k_rnn_tanh_unbatched, {{"out", out}, {"h_n", h}}, {{"x", x}, {"h0", h0}});
}

TEST_P(Rnn, CellsMatchPyTorch) {
  {
    nn::RNNCell m(3, 4);
    load(m, k_rnn_cell);
    Tensor x = input(k_rnn_cell, "x"), h0 = input(k_rnn_cell, "h0");
    expect_matches(m, k_rnn_cell, {{"h_n", m.forward(x, h0)}}, {{"x", x}, {"h0", h0}});
  }
  {
    nn::LSTMCell m(3, 4);
    load(m, k_lstm_cell);
    Tensor x = input(k_lstm_cell, "x"), h0 = input(k_lstm_cell, "h0"), c0 = input(k_lstm_cell, "c0");
    auto [h, c] = m.forward(x, std::make_pair(h0, c0));
    expect_matches(m, k_lstm_cell, {{"h_n", h}, {"c_n", c}}, {{"x", x}, {"h0", h0}, {"c0", c0}});
  }
  {
    nn::GRUCell m(3, 4);
    load(m, k_gru_cell);
    Tensor x = input(k_gru_cell, "x"), h0 = input(k_gru_cell, "h0");
    expect_matches(m, k_gru_cell, {{"h_n", m.forward(x, h0)}}, {{"x", x}, {"h0", h0}});
  }
  {
    nn::LSTMCell m(3, 4, false);
    load(m, k_lstm_cell_unbatched);
    Tensor x = input(k_lstm_cell_unbatched, "x");
    auto [h, c] = m.forward(x);
    expect_matches(m, k_lstm_cell_unbatched, {{"h_n", h}, {"c_n", c}}, {{"x", x}});
  }
}

TEST_P(Rnn, MissingStateIsZerosOnTheInputsDeviceAndDtype) {
  nn::GRU m(3, 4);
  m.to(dev_, kFloat64);
  Tensor x = randn({2, 3, 3}, TensorOptions(kFloat64).device(dev_));
  auto [out, h] = m.forward(x);
  auto [out0, h0] = m.forward(x, zeros({1, 3, 4}, TensorOptions(kFloat64).device(dev_)));
  EXPECT_EQ(h.device(), dev_);
  EXPECT_EQ(h.dtype(), kFloat64);
  EXPECT_TRUE(equal(out, out0));
  EXPECT_TRUE(equal(h, h0));
}

TEST_P(Rnn, DropoutBetweenLayersOnlyWhileTraining) {
  manual_seed(3);
  nn::LSTM m(3, 4, 2, true, false, 0.5);
  m.to(dev_);
  Tensor x = randn({4, 2, 3}).to(dev_);
  m.eval();
  auto [a, sa] = m.forward(x);
  auto [b, sb] = m.forward(x);
  EXPECT_TRUE(equal(a, b));  // no dropout in eval mode
  m.train();
  auto [c, sc] = m.forward(x);
  EXPECT_FALSE(allclose(a, c));  // the second layer sees a dropped-out input
}

// examples/wordlm's model (tied, dropout 0) from PyTorch's weights: one step's loss and every
// parameter's gradient are PyTorch's.
TEST_P(Rnn, WordModelTrainingStepMatchesPyTorch) {
  const Case& c = k_wordlm_step;
  wordlm::Config config;
  config.tokens = 12;
  config.emsize = config.nhid = 6;
  config.dropout = 0.0;
  config.tied = true;
  wordlm::RNNModel m(config);
  load(m, c);
  auto [logits, hidden] = m.forward(value(c, "tokens").to(kInt64), {value(c, "h0"), value(c, "c0")});
  Tensor loss = nn::functional::cross_entropy(logits, value(c, "targets").to(kInt64));
  expect_close(loss, value(c, "loss"), "loss");
  loss.backward();
  for (const auto& [key, p] : m.named_parameters()) expect_close(p.grad(), value(c, "grad." + key), key);
  EXPECT_EQ(m.init_hidden(3).at(1).device(), dev_);  // made with new_zeros from a parameter
}

// gradcheck of one layer's recurrence with its weights as inputs, both directions, over a
// packed batch whose sequences end at different steps.
TEST_P(Rnn, RecurrenceGradcheck) {
  manual_seed(11);
  auto opts = TensorOptions(kFloat64).device(dev_).requires_grad(true);
  const std::vector<int64_t> batch_sizes{3, 2, 2, 1};
  for (const std::string mode : {"LSTM", "GRU", "RNN_TANH"}) {
    const int64_t gates = mode == "LSTM" ? 4 : mode == "GRU" ? 3 : 1;
    for (bool reverse : {false, true}) {
      std::vector<Tensor> inputs{randn({8, 3}, opts), randn({3, 2}, opts), randn({gates * 2, 3}, opts),
                                 randn({gates * 2, 2}, opts), randn({gates * 2}, opts)};
      if (mode == "LSTM") inputs.push_back(randn({3, 2}, opts));
      auto fn = [&](const std::vector<Tensor>& in) {
        Tensor gates_in = detail::nn::project(in[0], in[2], Tensor());
        auto r = detail::nn::run_layer(mode, gates_in, batch_sizes, in[1], mode == "LSTM" ? in[5] : Tensor(), in[3],
                                       in[4], Tensor(), reverse, detail::nn::Tf32::kCudnnFlag);
        std::vector<Tensor> outs{r.output, r.h_n};
        if (mode == "LSTM") outs.push_back(r.c_n);
        return outs;
      };
      try {
        autograd::gradcheck(fn, inputs, 1e-6, 1e-5, 1e-3);
      } catch (const Error& e) {
        ADD_FAILURE() << mode << (reverse ? " reverse" : "") << " on " << dev_ << ": " << e.what();
      }
    }
  }
}

TEST_P(Rnn, ModuleGradcheckThroughInputsAndStates) {
  manual_seed(5);
  nn::LSTM m(2, 3, 2, true, true, 0.0, true, 2);
  m.to(dev_, kFloat64);
  auto opts = TensorOptions(kFloat64).device(dev_).requires_grad(true);
  auto fn = [&](const std::vector<Tensor>& in) {
    auto [out, state] = m.forward(in[0], std::make_pair(in[1], in[2]));
    return std::vector<Tensor>{out, state.first, state.second};
  };
  EXPECT_TRUE(autograd::gradcheck(fn, {randn({2, 3, 2}, opts), randn({4, 2, 2}, opts), randn({4, 2, 3}, opts)}));
}

// Note [Fused cells]: a recorded backward (create_graph) composes the gate math from ops, so
// second derivatives through the fused LSTM and GRU cells equal those of the same math
// written out with ops here.
TEST_P(Rnn, FusedCellsHaveTheComposedMathsSecondDerivatives) {
  manual_seed(17);
  auto opts = TensorOptions(kFloat64).device(dev_).requires_grad(true);
  for (const bool lstm : {true, false}) {
    const int64_t gates = lstm ? 4 : 3;
    std::vector<Tensor> in{randn({2, gates * 3}, opts), randn({2, gates * 3}, opts), randn({2, 3}, opts)};
    Tensor w = randn({2, 3}, TensorOptions(kFloat64).device(dev_));
    auto second = [&](bool fused) {
      Tensor loss;
      if (fused && lstm) {
        auto [h, c] = detail::nn::lstm_cell_step(in[0], in[1], in[2]);
        loss = (h * w).sum() + (c * c).sum();
      } else if (fused) {
        loss = (detail::nn::gru_cell_step(in[0], in[1], in[2]) * w).sum();
      } else if (lstm) {
        std::vector<Tensor> g = (in[0] + in[1]).chunk(4, 1);
        Tensor c = sigmoid(g[1]) * in[2] + sigmoid(g[0]) * tanh(g[2]);
        loss = (sigmoid(g[3]) * tanh(c) * w).sum() + (c * c).sum();
      } else {
        std::vector<Tensor> i = in[0].chunk(3, 1), h = in[1].chunk(3, 1);
        Tensor r = sigmoid(i[0] + h[0]), z = sigmoid(i[1] + h[1]), n = tanh(i[2] + r * h[2]);
        loss = (((in[2] - n) * z + n) * w).sum();
      }
      std::vector<Tensor> first = autograd::grad({loss}, in, {}, std::nullopt, /*create_graph=*/true);
      Tensor probe = (first[0] * first[0]).sum() + (first[1] * in[1]).sum() + (first[2] * first[2]).sum();
      return autograd::grad({probe}, in);
    };
    std::vector<Tensor> fused = second(true), composed = second(false);
    for (size_t k = 0; k < in.size(); ++k)
      EXPECT_TRUE(allclose(fused[k].cpu(), composed[k].cpu(), 1e-10, 1e-12))
          << (lstm ? "LSTM" : "GRU") << " input " << k << " on " << dev_;
  }
}

EMBER_ON_DEVICES(Rnn, "cpu", "cuda:0");

// ---- construction, parameters, repr, moves ------------------------------------------------

TEST(RnnModules, ParametersAreTorchsInNameOrderAndShape) {
  nn::LSTM m(3, 4, 2, true, false, 0.0, true, 2);
  std::vector<std::string> names;
  for (const auto& [key, p] : m.named_parameters()) names.push_back(key + str_shape(p));
  const std::vector<std::string> expected{"weight_ih_l0[16, 3]",
                                          "weight_hh_l0[16, 2]",
                                          "bias_ih_l0[16]",
                                          "bias_hh_l0[16]",
                                          "weight_hr_l0[2, 4]",
                                          "weight_ih_l0_reverse[16, 3]",
                                          "weight_hh_l0_reverse[16, 2]",
                                          "bias_ih_l0_reverse[16]",
                                          "bias_hh_l0_reverse[16]",
                                          "weight_hr_l0_reverse[2, 4]",
                                          "weight_ih_l1[16, 4]",
                                          "weight_hh_l1[16, 2]",
                                          "bias_ih_l1[16]",
                                          "bias_hh_l1[16]",
                                          "weight_hr_l1[2, 4]",
                                          "weight_ih_l1_reverse[16, 4]",
                                          "weight_hh_l1_reverse[16, 2]",
                                          "bias_ih_l1_reverse[16]",
                                          "bias_hh_l1_reverse[16]",
                                          "weight_hr_l1_reverse[2, 4]"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(m.state_dict().size(), 20u);
  nn::GRU g(3, 4, 1, false);
  EXPECT_EQ(g.state_dict().keys(), (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0"}));
  nn::GRUCell cell(3, 4);
  EXPECT_EQ(cell.state_dict().keys(), (std::vector<std::string>{"weight_ih", "weight_hh", "bias_ih", "bias_hh"}));
  EXPECT_EQ(cell.weight_ih.sizes(), (IntList{12, 3}));
}

TEST(RnnModules, StartUniformWithinOneOverSqrtHidden) {
  manual_seed(0);
  nn::GRU m(8, 16, 2);
  for (const auto& [key, p] : m.named_parameters()) {
    EXPECT_LE(p.abs().max().item<float>(), 0.25f) << key;
    EXPECT_GT(p.abs().max().item<float>(), 0.2f) << key;  // spread over the interval, not a constant
  }
  nn::LSTMCell cell(3, 4);
  EXPECT_LE(cell.weight_hh.abs().max().item<float>(), 0.5f);
}

TEST(RnnModules, ReprIsTorchs) {
  EXPECT_EQ(nn::LSTM(3, 4, 2, true, false, 0.0, true, 2).repr(),
            "LSTM(3, 4, proj_size=2, num_layers=2, bidirectional=True)");
  EXPECT_EQ(nn::RNN(3, 4, 2, "relu", false, true, 0.5).repr(),
            "RNN(3, 4, num_layers=2, bias=False, batch_first=True, dropout=0.5)");
  EXPECT_EQ(nn::GRU(3, 4, 1, true, false, 0.0, true).repr(), "GRU(3, 4, bidirectional=True)");
  EXPECT_EQ(nn::RNNCell(3, 4, false, "relu").repr(), "RNNCell(3, 4, bias=False, nonlinearity=relu)");
  EXPECT_EQ(nn::LSTMCell(3, 4).repr(), "LSTMCell(3, 4)");
}

TEST(RnnModules, ToADeviceKeepsParameterIdentityAndCloneCopies) {
  ensure_cuda();
  nn::LSTM m(3, 4, 1, true, false, 0.0, false, 2);
  Tensor w = m.named_parameters()["weight_hr_l0"];
  m.flatten_parameters();
  m.to(Device("cuda:0"));
  EXPECT_TRUE(w.is_cuda());  // the handle taken before the move sees the new device
  EXPECT_TRUE(m.weights(0, 0).back().is_same(w));
  auto [out, state] = m.forward(randn({2, 1, 3}).cuda());
  EXPECT_TRUE(out.is_cuda());
  EXPECT_EQ(state.first.sizes(), (IntList{1, 1, 2}));
  auto copy = std::dynamic_pointer_cast<nn::LSTM>(m.clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->repr(), m.repr());
  EXPECT_TRUE(equal(copy->named_parameters()["weight_hr_l0"], w));
  EXPECT_FALSE(copy->named_parameters()["weight_hr_l0"].is_same(w));
}

// clone() is a deep copy (Note [Deep copies]): the copy's recurrence reads the copy's own
// parameters, the cells' members too, and building the copy draws no random numbers.
TEST(RnnModules, CloneRunsOnItsOwnParametersAndLeavesTheGeneratorAlone) {
  manual_seed(11);
  nn::GRU gru(3, 4, 2, true, false, 0.0, true);
  nn::LSTMCell cell(3, 4);
  manual_seed(12);
  Tensor expected_draw = randn({3});
  manual_seed(12);
  auto gru_copy = std::dynamic_pointer_cast<nn::GRU>(gru.clone());
  auto cell_copy = std::dynamic_pointer_cast<nn::LSTMCell>(cell.clone());
  EXPECT_TRUE(equal(randn({3}), expected_draw));
  ASSERT_TRUE(gru_copy && cell_copy);
  for (int64_t layer = 0; layer < 2; ++layer)
    for (int64_t direction = 0; direction < 2; ++direction)
      for (size_t k = 0; k < 4; ++k) {
        const std::string name = std::string(k == 0   ? "weight_ih"
                                             : k == 1 ? "weight_hh"
                                             : k == 2 ? "bias_ih"
                                                      : "bias_hh") +
                                 "_l" + std::to_string(layer) + (direction ? "_reverse" : "");
        EXPECT_TRUE(gru_copy->weights(layer, direction)[k].is_same(gru_copy->named_parameters()[name])) << name;
      }
  EXPECT_TRUE(cell_copy->weight_ih.is_same(cell_copy->named_parameters()["weight_ih"]));
  EXPECT_TRUE(cell_copy->bias_hh.is_same(cell_copy->named_parameters()["bias_hh"]));
  Tensor x = randn({5, 2, 3});
  EXPECT_TRUE(equal(gru_copy->forward(x).first, gru.forward(x).first));
  {
    NoGradGuard no_grad;
    gru_copy->named_parameters()["weight_ih_l0"].fill_(0.0);
  }
  EXPECT_FALSE(equal(gru_copy->forward(x).first, gru.forward(x).first));
}

// Note [Recurrent TF32]: on a cuda device the modules follow backends::cudnn.allow_tf32 and
// the cells backends::cuda::matmul.allow_tf32 (emulated devices round as TF32 would); the cpu
// never rounds.
TEST(RnnTf32, ModulesFollowTheCudnnFlagAndCellsTheMatmulFlag) {
  ensure_cuda();
  const bool saved_matmul = backends::cuda::matmul.allow_tf32, saved_cudnn = backends::cudnn.allow_tf32;
  manual_seed(4);
  auto lstm = std::make_shared<nn::LSTM>(8, 16, 1, true, false, 0.0, true, 4);
  auto cell = std::make_shared<nn::GRUCell>(8, 16);
  Tensor x = randn({3, 2, 8});
  auto outputs = [&](Device device, bool matmul_flag, bool cudnn_flag) {
    backends::cuda::matmul.allow_tf32 = matmul_flag;
    backends::cudnn.allow_tf32 = cudnn_flag;
    lstm->to(device);
    cell->to(device);
    lstm->zero_grad();
    auto [out, state] = lstm->forward(x.to(device));
    out.sum().backward();
    // Detached: a graph kept alive would pin the parameters' gradient accumulators to this device.
    return std::vector<Tensor>{out.detach().cpu(), lstm->weights(0, 1)[1].grad().cpu(),
                               cell->forward(x[0].to(device)).detach().cpu()};
  };
  const Device cuda("cuda:0");
  const std::vector<Tensor> exact = outputs(cuda, false, false), cpu = outputs(Device(kCPU), true, true);
  const std::vector<Tensor> matmul_only = outputs(cuda, true, false), cudnn_only = outputs(cuda, false, true);
  backends::cuda::matmul.allow_tf32 = saved_matmul;
  backends::cudnn.allow_tf32 = saved_cudnn;
  EXPECT_TRUE(allclose(cpu[0], exact[0], 1e-5, 1e-6));
  EXPECT_TRUE(allclose(cpu[2], exact[2], 1e-5, 1e-6));
  EXPECT_TRUE(equal(matmul_only[0], exact[0]));   // the matmul flag does not reach the module...
  EXPECT_TRUE(equal(matmul_only[1], exact[1]));   // ...nor its backward
  EXPECT_FALSE(equal(matmul_only[2], exact[2]));  // but it reaches the cell
  EXPECT_FALSE(equal(cudnn_only[0], exact[0]));   // the cudnn flag reaches the module
  EXPECT_FALSE(equal(cudnn_only[1], exact[1]));
  EXPECT_TRUE(allclose(cudnn_only[0], exact[0], 1e-2, 1e-2));
  EXPECT_TRUE(equal(cudnn_only[2], exact[2]));  // and not the cell
}

}  // namespace
}  // namespace ember::testing
