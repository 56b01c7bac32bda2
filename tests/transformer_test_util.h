// Shared by the transformer ops' tests: the inputs PyTorch's numbers were made from
// (tests/transformer_ops_expected.py) and the dot products it stores.
#pragma once

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "test_support.h"
#include "transformer_ops_expected.h"

namespace ember::testing {

/// seq(shape, c)[i] = sin(0.37 * i + c), row-major, float64 (as the script's seq).
inline Tensor seq(const IntList& shape, double c, Device device = Device(kCPU), DType dtype = kFloat64) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(0.37 * static_cast<double>(i) + c);
  return tensor(TensorData(v), TensorOptions(kFloat64)).reshape(shape).to(dtype).to(device);
}

/// (t * seq(t.shape, c)).sum() in float64 on the cpu.
inline double dot(const Tensor& t, double c) {
  Tensor h = t.detach().to(Device(kCPU)).to(kFloat64);
  return (h * seq(h.sizes(), c)).sum().item<double>();
}

/// Runs fn on leaves seq(shape_i, c_i) (on `device`, requiring grad), backpropagates
/// sum(out * seq(.5)) and compares [sum(out), dot(out, .5), dot(grad_i, 1.5)...] with
/// PyTorch's `expected`.
template <typename Fn, size_t N>
void expect_case(const char* what, Fn fn, const std::vector<std::pair<IntList, double>>& inputs,
                 const double (&expected)[N], Device device, double tol = 1e-10) {
  ASSERT_EQ(N, inputs.size() + 2) << what;
  std::vector<Tensor> leaves;
  for (const auto& [shape, c] : inputs) leaves.push_back(seq(shape, c, device).requires_grad_(true));
  Tensor out = fn(leaves);
  (out * seq(out.sizes(), 0.5, device)).sum().backward();
  EXPECT_NEAR(out.sum().item<double>(), expected[0], tol) << what;
  EXPECT_NEAR(dot(out, 0.5), expected[1], tol) << what;
  for (size_t i = 0; i < leaves.size(); ++i) {
    ASSERT_TRUE(leaves[i].grad().defined()) << what << " input " << i;
    EXPECT_NEAR(dot(leaves[i].grad(), 1.5), expected[i + 2], tol) << what << " grad of input " << i;
  }
}

/// Expects `t` (any device) to hold the n values at `expected`, row-major.
inline void expect_values(const std::string& what, const Tensor& t, const double* expected, size_t n,
                          double tol = 1e-10) {
  Tensor h = t.detach().to(Device(kCPU)).to(kFloat64).contiguous();
  ASSERT_EQ(h.numel(), static_cast<int64_t>(n)) << what;
  std::vector<double> values = h.to_vector<double>();
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(values[i], expected[i], tol) << what << " [" << i << "]";
}
template <size_t N>
void expect_values(const char* what, const Tensor& t, const double (&expected)[N], double tol = 1e-10) {
  expect_values(std::string(what), t, expected, N, tol);
}

/// gradcheck of fn (returning a Tensor or a vector of them), its failure as the test's.
template <typename Fn>
void expect_gradcheck(const char* what, Fn fn, const std::vector<Tensor>& inputs) {
  autograd::GradcheckFn check;
  if constexpr (std::is_same_v<std::invoke_result_t<Fn, const std::vector<Tensor>&>, Tensor>) {
    check = [fn](const std::vector<Tensor>& x) { return std::vector<Tensor>{fn(x)}; };
  } else {
    check = fn;
  }
  try {
    autograd::gradcheck(check, inputs, 1e-6, 1e-5, 1e-3);
  } catch (const Error& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

/// The gradients of `fn`'s output (weighted by `grad_output`) w.r.t. `inputs`, recorded
/// (create_graph): for a gradcheck of the gradients (double backward). gradcheck's
/// finite-difference passes run under no_grad on inputs that do not require grad: there
/// the gradients are taken of local leaves.
template <typename Fn>
std::vector<Tensor> recorded_grads(Fn fn, const std::vector<Tensor>& inputs, const Tensor& grad_output) {
  AutoGradMode enable(true);
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) leaves.push_back(t.requires_grad() ? t : t.detach().requires_grad_(true));
  return autograd::grad({fn(leaves)}, leaves, {grad_output}, std::nullopt, /*create_graph=*/true);
}

}  // namespace ember::testing
