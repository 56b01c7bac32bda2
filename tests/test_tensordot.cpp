// tensordot against PyTorch 1.13 (float64, values and gradients: distance_expected.h, made by
// distance_expected.py) on the cpu and a cuda device (emulated without a GPU): dim lists, an
// int, 0 (the outer product), negative dims, size-1 contracted dims; TF32 under
// backends::cuda::matmul.allow_tf32 on cuda devices only; gradcheck; PyTorch's errors.
#include <functional>

#include "distance_test_util.h"

namespace ember::testing {
namespace {

using namespace distance_expected;

class Tensordot : public OnDevice {
 protected:
  Tensor input(int64_t n, int64_t mul, int64_t mod, double scale, double offset, const IntList& shape) const {
    return from_values(distance_values(n, mul, mod, scale, offset), shape, dev_).requires_grad_();
  }
  // a from vals(n, 7, 13, 0.5, -3), b from vals(m, 5, 11, 0.25, -1), as distance_expected.py.
  void expect_case(const IntList& shape_a, const IntList& shape_b, const std::function<Tensor(Tensor, Tensor)>& op,
                   const Case& c, const std::string& what) {
    int64_t n = 1, m = 1;
    for (int64_t s : shape_a) n *= s;
    for (int64_t s : shape_b) m *= s;
    Tensor a = input(n, 7, 13, 0.5, -3.0, shape_a), b = input(m, 5, 11, 0.25, -1.0, shape_b);
    Tensor out = op(a, b);
    EXPECT_EQ(out.device(), dev_);
    (out * distance_probe(out.sizes(), dev_)).sum().backward();
    expect_values(out, expected(c, "out"), what + " out");
    expect_values(a.grad(), expected(c, "grad_a"), what + " grad_a");
    expect_values(b.grad(), expected(c, "grad_b"), what + " grad_b");
  }
};

TEST_P(Tensordot, DimListsMatchPyTorch) {
  expect_case(
      {3, 4, 5}, {4, 3, 2},
      [](Tensor a, Tensor b) {
        return tensordot(a, b, {1, 0}, {0, 1});
      },
      k_tensordot_lists, "lists");
  EXPECT_EQ(tensordot(zeros({3, 4, 5}), zeros({4, 3, 2}), {1, 0}, {0, 1}).sizes(), (IntList{5, 2}));
}

TEST_P(Tensordot, IntDimsMatchPyTorch) {
  expect_case(
      {2, 3, 4}, {3, 4, 5}, [](Tensor a, Tensor b) { return tensordot(a, b, 2); }, k_tensordot_int, "int");
}

TEST_P(Tensordot, ZeroDimsIsTheOuterProduct) {
  expect_case(
      {2, 3}, {4}, [](Tensor a, Tensor b) { return tensordot(a, b, 0); }, k_tensordot_outer, "outer");
}

TEST_P(Tensordot, NegativeDimsCountFromTheEnd) {
  expect_case(
      {2, 3, 4}, {4, 5}, [](Tensor a, Tensor b) { return tensordot(a, b, {-1}, {-2}); }, k_tensordot_negative,
      "negative");
}

// a [3, 1, 2] with b [5, 2, 2] over dims (1, 2): a's size-1 dim against b's 2 sums b's away.
TEST_P(Tensordot, SizeOneContractedDimsBroadcast) {
  expect_case(
      {3, 1, 2}, {5, 2, 2},
      [](Tensor a, Tensor b) {
        return tensordot(a, b, {1, 2}, {1, 2});
      },
      k_tensordot_broadcast, "broadcast");
}

TEST_P(Tensordot, EmptyContractionsAndScalars) {
  const TensorOptions opts = TensorOptions(kFloat64).device(dev_);
  EXPECT_TRUE(equal(tensordot(ones({3, 0}, opts), ones({0, 4}, opts), 1), zeros({3, 4}, opts)));
  EXPECT_TRUE(equal(tensordot(full({}, 2.0, opts), ones({3}, opts), 0), full({3}, 2.0, opts)));
  EXPECT_EQ(tensordot(ones({2, 3}, opts), ones({3, 2}, opts), {1, 0}, {0, 1}).sizes(), IntList{});
}

TEST_P(Tensordot, Gradcheck) {
  manual_seed(2);
  Tensor a = randn({2, 3, 4}, TensorOptions(kFloat64).device(dev_)).requires_grad_();
  Tensor b = randn({4, 2, 5}, TensorOptions(kFloat64).device(dev_)).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck(
      [](const std::vector<Tensor>& x) {
        return std::vector<Tensor>{tensordot(x[0], x[1], {2, 0}, {0, 1})};
      },
      {a, b}));
}

EMBER_ON_DEVICES(Tensordot, "cpu", "cuda:0");

// One matmul underneath: on a cuda device it follows backends::cuda::matmul.allow_tf32
// (emulated devices round as TF32 would), forward and backward; on the cpu never.
TEST(TensordotTf32, TheMatmulFlagReachesCudaDevicesOnly) {
  ensure_cuda();
  manual_seed(6);
  Tensor a = randn({8, 16, 32}), b = randn({16, 32, 8});
  const bool saved = backends::cuda::matmul.allow_tf32;
  auto run = [&](Device device, bool tf32) {
    backends::cuda::matmul.allow_tf32 = tf32;
    Tensor x = a.to(device, false, /*copy=*/true).requires_grad_();
    Tensor out = tensordot(x, b.to(device), 2);
    (out * out).sum().backward();
    return std::make_pair(out.detach().cpu(), x.grad().cpu());
  };
  auto cuda_off = run(Device("cuda:0"), false), cuda_on = run(Device("cuda:0"), true);
  auto cpu_off = run(Device(kCPU), false), cpu_on = run(Device(kCPU), true);
  backends::cuda::matmul.allow_tf32 = saved;
  EXPECT_FALSE(equal(cuda_on.first, cuda_off.first));
  EXPECT_FALSE(equal(cuda_on.second, cuda_off.second));
  EXPECT_TRUE(allclose(cuda_on.first, cuda_off.first, 1e-2, 1e-1));
  EXPECT_TRUE(equal(cpu_on.first, cpu_off.first));
  EXPECT_TRUE(equal(cpu_on.second, cpu_off.second));
  EXPECT_TRUE(allclose(cuda_off.first, cpu_off.first, 1e-5, 1e-4));
}

TEST(TensordotErrors, PyTorchsMessages) {
  Tensor a = zeros({3, 4}), b = zeros({5, 4});
  EXPECT_THROW_MSG(tensordot(a, b, -1), ValueError, "tensordot expects dims >= 0, but got dims=-1");
  EXPECT_THROW_MSG(tensordot(a, b, 3), ValueError, "tensordot expects dims < ndim_a or ndim_b, but got dims=3");
  EXPECT_THROW_MSG(tensordot(a, b, {0}, {0, 1}), ValueError, "both dimension lists should have same length");
  EXPECT_THROW_MSG(tensordot(a, b, {1}, {0}), ValueError,
                   "contracted dimensions need to match, but first has size 4 in dim 1 and second has size 5 in dim 0");
  EXPECT_THROW_MSG(
      tensordot(a, b, {-1}, {-2}), ValueError,
      "contracted dimensions need to match, but first has size 4 in dim -1 and second has size 5 in dim -2");
  EXPECT_THROW_MSG(tensordot(a, b, {5}, {0}), IndexError,
                   "Dimension out of range (expected to be in range of [-2, 1], but got 5)");
  EXPECT_THROW_MSG(tensordot(zeros({4, 4}), zeros({4, 4}), {0, 0}, {0, 1}), ValueError,
                   "dim 0 appears multiple times in the list of dims");
  EXPECT_THROW_MSG(tensordot(a, zeros({4, 2}, TensorOptions(kFloat64)), 1), TypeError,
                   "both inputs should have same dtype");
  ensure_cuda();
  EXPECT_THROW_MSG(tensordot(a, zeros({4, 2}, TensorOptions(Device("cuda:0"))), 1), DeviceError,
                   "Expected all tensors to be on the same device");
}

}  // namespace
}  // namespace ember::testing
