// Note [Batched recurrent weight gradient] (src/nn/modules/rnn_layer.cpp): the layer sums
// W_hh's gradient over its steps in one product, from the step that ran first. These check it
// against the recurrence written out here with a product per step (float64): when the loss
// weighs every step or one, in both directions; with the graph retained and the backward run
// twice, also after a pass that skipped the first step (which must keep nothing); and the
// second derivatives under create_graph.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "ember/ember.h"
#include "nn/modules/rnn_layer.h"
#include "test_support.h"

namespace ember::testing {
namespace {

constexpr int64_t kSteps = 4, kBatch = 3, kHidden = 2, kFeatures = 3;

int64_t gate_count(const std::string& mode) { return mode == "LSTM" ? 4 : mode == "GRU" ? 3 : 1; }

class RnnWeightGrad : public OnDevice {
 protected:
  // in: x [T B, F], h0 [B, H], w_ih [G H, F], w_hh [G H, H], b_hh [G H] (GRU only), c0 (LSTM only)
  std::vector<Tensor> inputs(const std::string& mode) const {
    auto opts = TensorOptions(kFloat64).device(dev_).requires_grad(true);
    const int64_t gates = gate_count(mode) * kHidden;
    std::vector<Tensor> in{randn({kSteps * kBatch, kFeatures}, opts), randn({kBatch, kHidden}, opts),
                           randn({gates, kFeatures}, opts), randn({gates, kHidden}, opts)};
    in.push_back(mode == "GRU" ? randn({gates}, opts) : Tensor());
    in.push_back(mode == "LSTM" ? randn({kBatch, kHidden}, opts) : Tensor());
    return in;
  }

  // The layer's outputs [T B, H] through run_layer, or through a product per step (reference).
  static Tensor outputs(const std::string& mode, const std::vector<Tensor>& in, bool reverse, bool per_step) {
    namespace rnn = detail::nn;
    Tensor gates = rnn::project(in[0], in[2], Tensor());
    if (!per_step) {
      const std::vector<int64_t> batch_sizes(kSteps, kBatch);
      return rnn::run_layer(mode, gates, batch_sizes, in[1], in[5], in[3], in[4], Tensor(), reverse,
                            rnn::Tf32::kCudnnFlag)
          .output;
    }
    std::vector<Tensor> out(kSteps);
    Tensor h = in[1], c = in[5];
    for (int64_t k = 0; k < kSteps; ++k) {
      const int64_t t = reverse ? kSteps - 1 - k : k;
      Tensor igates = gates.narrow(0, t * kBatch, kBatch), hgates = matmul(h, in[3].t());
      if (in[4].defined()) hgates = hgates + in[4];
      if (mode == "LSTM") {
        std::tie(h, c) = rnn::lstm_cell_step(igates, hgates, c);
      } else if (mode == "GRU") {
        h = rnn::gru_cell_step(igates, hgates, h);
      } else {
        h = rnn::rnn_cell_step(igates, hgates, false);
      }
      out[static_cast<size_t>(t)] = h;
    }
    return cat(out, 0);
  }

  static std::vector<Tensor> differentiable(const std::vector<Tensor>& in) {
    std::vector<Tensor> out;
    for (const Tensor& t : in) {
      if (t.defined()) out.push_back(t);
    }
    return out;
  }

  static void expect_same(const std::vector<Tensor>& got, const std::vector<Tensor>& expected,
                          const std::string& what) {
    ASSERT_EQ(got.size(), expected.size()) << what;
    for (size_t k = 0; k < got.size(); ++k) {
      ASSERT_TRUE(got[k].defined() && expected[k].defined()) << what << ", input " << k;
      EXPECT_TRUE(allclose(got[k].cpu(), expected[k].cpu(), 1e-12, 1e-12)) << what << ", input " << k;
    }
  }
};

TEST_P(RnnWeightGrad, EqualsAProductPerStepWhenTheLossWeighsAllStepsOrOne) {
  manual_seed(36);
  for (const std::string mode : {"LSTM", "GRU", "RNN_TANH"}) {
    for (const bool reverse : {false, true}) {
      // 0: every step's output weighed; 1: only step 1's (the other steps then hand over
      // zero gradients of their own outputs, and the forward direction's steps 2 and 3 only
      // zeros).
      for (const int reach : {0, 1}) {
        const std::vector<Tensor> in = inputs(mode), wrt = differentiable(in);
        const auto opts = TensorOptions(kFloat64).device(dev_);
        Tensor probe = randn({kSteps * kBatch, kHidden}, opts);
        if (reach == 1) {
          Tensor mask = zeros({kSteps * kBatch, 1}, opts);
          mask.narrow(0, kBatch, kBatch).fill_(1.0);
          probe = probe * mask;
        }
        auto grads = [&](bool per_step) {
          return autograd::grad({(outputs(mode, in, reverse, per_step) * probe).sum()}, wrt);
        };
        expect_same(grads(false), grads(true), mode + (reverse ? " reverse" : "") + " reach " + std::to_string(reach));
      }
    }
  }
}

TEST_P(RnnWeightGrad, ARetainedGraphGivesTheSameGradientAgain) {
  manual_seed(7);
  for (const std::string mode : {"LSTM", "GRU"}) {
    const std::vector<Tensor> in = inputs(mode), wrt = differentiable(in);
    Tensor loss = outputs(mode, in, false, false).pow(2).sum();
    const std::vector<Tensor> first = autograd::grad({loss}, wrt, {}, /*retain_graph=*/true);
    const std::vector<Tensor> second = autograd::grad({loss}, wrt);
    expect_same(second, first, mode);
  }
}

// A pass with respect to x alone runs every step but the first (whose node leads only to h0
// and W_hh), so no step sums what the others hand over: it is dropped at the end of the pass,
// not kept with the retained graph (seen in the device's allocated bytes, which return to
// what the graph holds), and the next pass's gradient is the per-step one.
TEST_P(RnnWeightGrad, APassWithoutTheFirstStepKeepsNothing) {
  if (!dev_.is_cuda()) GTEST_SKIP() << "allocated bytes are counted on cuda devices";
  manual_seed(3);
  for (const std::string mode : {"LSTM", "GRU"}) {
    const std::vector<Tensor> in = inputs(mode);
    const Tensor out = outputs(mode, in, false, false), loss = out.pow(2).sum();
    cuda::synchronize(dev_.index());
    const size_t held = cuda::memory_allocated(dev_.index());
    autograd::grad({loss}, {in[0]}, {}, /*retain_graph=*/true);
    cuda::synchronize(dev_.index());
    EXPECT_EQ(cuda::memory_allocated(dev_.index()), held) << mode;
    const Tensor got = autograd::grad({loss}, {in[3]})[0];
    const Tensor expected = autograd::grad({outputs(mode, in, false, true).pow(2).sum()}, {in[3]})[0];
    EXPECT_TRUE(allclose(got.cpu(), expected.cpu(), 1e-12, 1e-12)) << mode;
  }
}

TEST_P(RnnWeightGrad, SecondDerivativesEqualAProductPerStep) {
  manual_seed(17);
  for (const std::string mode : {"LSTM", "GRU", "RNN_TANH"}) {
    for (const bool reverse : {false, true}) {
      const std::vector<Tensor> in = inputs(mode), wrt = differentiable(in);
      auto second = [&](bool per_step) {
        Tensor loss = outputs(mode, in, reverse, per_step).pow(2).sum();
        std::vector<Tensor> first = autograd::grad({loss}, wrt, {}, std::nullopt, /*create_graph=*/true);
        Tensor probe = (first[3] * first[3]).sum() + (first[1] * first[0].sum()).sum();
        return autograd::grad({probe}, wrt);
      };
      expect_same(second(false), second(true), mode + (reverse ? " reverse" : ""));
    }
  }
}

EMBER_ON_DEVICES(RnnWeightGrad, "cpu", "cuda:0");

}  // namespace
}  // namespace ember::testing
