// Shared by the recurrent-network tests: the cases of rnn_expected.h (PyTorch 1.13, float64)
// loaded on a device, and the comparison of a module's outputs and gradients with them.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "ember/ember.h"
#include "rnn_expected.h"
#include "test_support.h"

namespace ember::testing {

using rnn_expected::Case;

class RnnCase : public OnDevice {
 protected:
  Tensor value(const Case& c, const std::string& key) const {
    for (const auto& [name, v] : c) {
      if (name == key) return tensor(TensorData(v.data), TensorOptions(kFloat64)).reshape(v.shape).to(dev_);
    }
    ADD_FAILURE() << "no expected value '" << key << "'";
    return Tensor();
  }
  Tensor input(const Case& c, const std::string& key) const { return value(c, key).requires_grad_(true); }

  /// The module in float64 on the device, with the case's state dict (PyTorch's keys).
  void load(nn::Module& module, const Case& c) const {
    module.to(dev_, kFloat64);
    nn::StateDict state;
    for (const auto& key : module.state_dict().keys()) state.insert(key, value(c, key));
    module.load_state_dict(state);
  }

  static void expect_close(const Tensor& got, const Tensor& expected, const std::string& what, double tol = 1e-10) {
    ASSERT_TRUE(got.defined()) << what;
    ASSERT_EQ(got.sizes(), expected.sizes()) << what;
    EXPECT_EQ(got.device(), expected.device()) << what;
    const std::vector<double> g = got.cpu().contiguous().reshape({-1}).to_vector<double>();
    const std::vector<double> e = expected.cpu().contiguous().reshape({-1}).to_vector<double>();
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_NEAR(g[i], e[i], tol * (1 + std::abs(e[i]))) << what << " element " << i;
    }
  }

  /// outputs by the case's names ("out", "h_n", "c_n"): each equals PyTorch's; then the
  /// gradients of sum(output * probe) over them equal PyTorch's for `inputs` and every
  /// parameter.
  void expect_matches(const nn::Module& module, const Case& c,
                      const std::vector<std::pair<std::string, Tensor>>& outputs,
                      const std::vector<std::pair<std::string, Tensor>>& inputs) const {
    Tensor loss;
    for (const auto& [key, out] : outputs) {
      expect_close(out, value(c, key), key);
      Tensor term = (out * value(c, "probe." + key)).sum();
      loss = loss.defined() ? loss + term : term;
    }
    loss.backward();
    for (const auto& [key, t] : inputs) expect_close(t.grad(), value(c, "grad." + key), "grad." + key);
    for (const auto& [key, p] : module.named_parameters()) expect_close(p.grad(), value(c, "grad." + key), key);
  }
};

}  // namespace ember::testing
