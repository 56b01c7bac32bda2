// cdist against PyTorch 1.13 on the cpu and a cuda device (emulated without a GPU): values and
// gradients for every kind of p on both paths (float64; the numbers are PyTorch's direct
// mode, in distance_expected.h, made by distance_expected.py), the matrix-product path on the
// cases where PyTorch's loses its digits (PyTorch 1.13's own numbers in the comments), TF32
// under backends::cuda::matmul.allow_tf32, blocks of large inputs, gradcheck and errors.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "distance_test_util.h"

namespace ember::testing {
namespace {

using namespace distance_expected;

constexpr const char* kDirect = "donot_use_mm_for_euclid_dist";
constexpr const char* kProduct = "use_mm_for_euclid_dist";
constexpr double kInfinity = std::numeric_limits<double>::infinity();

class Cdist : public OnDevice {
 protected:
  // distance_expected.py's cdist_inputs_small(): x1 [2, 3, 4], x2 [1, 5, 4], x2[0][0] = x1[0][0].
  std::pair<Tensor, Tensor> small_inputs() const {
    std::vector<double> v1 = distance_values(24, 7, 11, 0.5, -2.5), v2 = distance_values(20, 5, 9, 0.5, -2.0);
    std::copy(v1.begin(), v1.begin() + 4, v2.begin());
    return {from_values(v1, {2, 3, 4}, dev_).requires_grad_(), from_values(v2, {1, 5, 4}, dev_).requires_grad_()};
  }
  // cdist_inputs_large(): x1 [30, 3], x2 [4, 3], x2[0] = x1[5].
  std::pair<Tensor, Tensor> large_inputs() const {
    std::vector<double> v1 = distance_values(90, 11, 17, 0.25, -2.0), v2 = distance_values(12, 3, 7, 0.5, -1.5);
    std::copy(v1.begin() + 15, v1.begin() + 18, v2.begin());
    return {from_values(v1, {30, 3}, dev_).requires_grad_(), from_values(v2, {4, 3}, dev_).requires_grad_()};
  }
  void expect_case(const Tensor& x1, const Tensor& x2, double p, const std::string& mode, const Case& c,
                   const std::string& what, double tol = 1e-12) {
    x1.mutable_grad() = Tensor();
    x2.mutable_grad() = Tensor();
    Tensor out = cdist(x1, x2, p, mode);
    EXPECT_EQ(out.device(), dev_);
    (out * distance_probe(out.sizes(), dev_)).sum().backward();
    expect_values(out, expected(c, "out"), what + " out", tol);
    expect_values(x1.grad(), expected(c, "grad_x1"), what + " grad_x1", tol);
    expect_values(x2.grad(), expected(c, "grad_x2"), what + " grad_x2", tol);
  }
};

TEST_P(Cdist, EveryKindOfPMatchesPyTorchWithBroadcastBatches) {
  auto [x1, x2] = small_inputs();
  const std::vector<std::pair<double, const Case*>> cases = {
      {0.0, &k_cdist_p_zero}, {0.5, &k_cdist_p_half},  {1.0, &k_cdist_p_one},      {1.5, &k_cdist_p_one_and_half},
      {2.0, &k_cdist_p_two},  {3.0, &k_cdist_p_three}, {kInfinity, &k_cdist_p_inf}};
  for (const auto& [p, c] : cases) {
    expect_case(x1, x2, p, kDirect, *c, "p=" + std::to_string(p));
    // Three rows: the default mode stays on the direct path.
    expect_case(x1, x2, p, "use_mm_for_euclid_dist_if_necessary", *c, "default p=" + std::to_string(p));
  }
  expect_case(x1, x2, 2.0, kProduct, k_cdist_p_two, "forced product path", 1e-10);
}

TEST_P(Cdist, ProductPathGivesTheDirectPathsNumbersAndZeroGradientAtZero) {
  auto [x1, x2] = large_inputs();
  // 30 rows: the default mode takes the product path (PyTorch's rule, P > 25).
  expect_case(x1, x2, 2.0, "use_mm_for_euclid_dist_if_necessary", k_cdist_large_p_two, "product path", 1e-10);
  EXPECT_EQ(cdist(x1, x2).detach()[5][0].item<double>(), 0.0);  // identical rows: exactly 0
}

// A pair 1e-7 apart among rows about 1 apart: the product path marks it and recomputes its
// distance and its gradient directly.
TEST_P(Cdist, EntriesThatLostTheirDigitsGetTheDirectValueAndGradient) {
  auto [x1, x2] = large_inputs();
  Tensor a = x1.detach().clone(), b = x2.detach().clone();
  a[3].copy_(b[1] + tensor(TensorData({1e-7, 0.0, 0.0}), TensorOptions(kFloat64)).to(dev_));
  a.requires_grad_();
  b.requires_grad_();
  Tensor product = cdist(a, b, 2.0, kProduct), direct = cdist(a, b, 2.0, kDirect);
  EXPECT_NEAR(product[3][1].item<double>(), 1e-7, 1e-15);
  expect_values(product, direct.detach().cpu().reshape({-1}).to_vector<double>(), "values", 1e-12);
  Tensor probe = distance_probe(product.sizes(), dev_);
  auto g_product = autograd::grad({(product * probe).sum()}, {a, b});
  auto g_direct = autograd::grad({(direct * probe).sum()}, {a, b});
  expect_values(g_product[0], g_direct[0].cpu().reshape({-1}).to_vector<double>(), "grad x1", 1e-9);
  expect_values(g_product[1], g_direct[1].cpu().reshape({-1}).to_vector<double>(), "grad x2", 1e-9);
}

// An inf or a NaN in a row: PyTorch's product path gives NaN for some of that row's entries
// where its direct path gives inf; ember's gives the direct path's numbers, and the other rows
// stay finite.
TEST_P(Cdist, NonFiniteRowsGiveTheDirectPathsValues) {
  auto [x1, x2] = large_inputs();
  Tensor a = x1.detach().clone();
  a[2][1].fill_(std::numeric_limits<double>::infinity());
  a[3][0].fill_(std::numeric_limits<double>::quiet_NaN());
  const std::vector<double> product = cdist(a, x2.detach()).cpu().reshape({-1}).to_vector<double>();
  const std::vector<double> direct = cdist(a, x2.detach(), 2.0, kDirect).cpu().reshape({-1}).to_vector<double>();
  for (size_t i = 0; i < product.size(); ++i) {
    if (std::isnan(direct[i])) {
      EXPECT_TRUE(std::isnan(product[i])) << "entry " << i;
    } else if (std::isinf(direct[i])) {
      EXPECT_EQ(product[i], direct[i]) << "entry " << i;
    } else {
      EXPECT_NEAR(product[i], direct[i], 1e-12 * (1 + direct[i])) << "entry " << i;
    }
  }
  EXPECT_TRUE(std::isinf(product[2 * 4]));
  EXPECT_TRUE(std::isfinite(product[4 * 4]));
  // A finite row's gradient is the direct path's.
  Tensor b = a.clone().requires_grad_(), c = a.clone().requires_grad_();
  cdist(b, x2.detach()).sum().backward();
  cdist(c, x2.detach(), 2.0, kDirect).sum().backward();
  expect_values(b.grad()[0], c.grad()[0].cpu().to_vector<double>(), "grad of row 0", 1e-12);
}

// pytorch#42479: PyTorch 1.13's product path gives 0 here; its direct path 109.
TEST_P(Cdist, DistantRowsFarFromTheOriginKeepTheirDistance) {
  Tensor a = tensor(TensorData({512695.0}), TensorOptions(kFloat32)).reshape({1, 1}).to(dev_);
  Tensor b = tensor(TensorData({512804.0}), TensorOptions(kFloat32)).reshape({1, 1}).to(dev_);
  EXPECT_EQ(cdist(a, b, 2.0, kProduct).item<float>(), 109.0f);
}

// Rows 1000 + k 2^-10 (float32). PyTorch 1.13's product path (the default here: 30 rows) gives
// 0 for 74 of these 90 distances and 0.5 for one that is 0.00526; its direct path, in
// float64, gives the numbers below. ember's product path keeps them, TF32 or not.
TEST_P(Cdist, CloseRowsFarFromTheOriginKeepTheirDistance) {
  std::vector<double> v1 = distance_values(120, 5, 7, 0x1p-10, 1000.0), v2 = distance_values(12, 3, 5, 0x1p-10, 1000.0);
  Tensor x1 = from_values(v1, {30, 4}, dev_, kFloat32), x2 = from_values(v2, {3, 4}, dev_, kFloat32);
  const std::vector<double> pytorch_first_row = {0.004026470337517247, 0.005258950006967289, 0.006019935549774391};
  const std::vector<double> reference =
      cdist(x1.to(kFloat64), x2.to(kFloat64), 2.0, kDirect).cpu().reshape({-1}).to_vector<double>();
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(reference[i], pytorch_first_row[i], 1e-15);
  const bool saved = backends::cuda::matmul.allow_tf32;
  for (bool tf32 : {false, true}) {
    backends::cuda::matmul.allow_tf32 = tf32;
    const std::vector<double> got = cdist(x1, x2).to(kFloat64).cpu().reshape({-1}).to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], reference[i], (tf32 ? 3e-2 : 1e-4) * reference[i]) << "entry " << i << " tf32 " << tf32;
    }
  }
  backends::cuda::matmul.allow_tf32 = saved;
}

// pytorch#57690: PyTorch 1.13's product path gives 13 of these 40 self-distances non-zero (up
// to 0.015625); the direct path gives 0. ember's product path gives exactly 0, TF32 or not.
TEST_P(Cdist, IdenticalRowsAreExactlyZeroApart) {
  std::vector<double> v(40 * 16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 10.0 + 3 * std::sin(static_cast<double>(i) * 0.7);
  Tensor x = from_values(v, {40, 16}, dev_, kFloat32).requires_grad_();
  const bool saved = backends::cuda::matmul.allow_tf32;
  for (bool tf32 : {false, true}) {
    backends::cuda::matmul.allow_tf32 = tf32;
    x.mutable_grad() = Tensor();
    Tensor d = cdist(x, x);
    const std::vector<float> all = d.detach().cpu().reshape({-1}).to_vector<float>();
    for (int64_t i = 0; i < 40; ++i) EXPECT_EQ(all[static_cast<size_t>(i * 41)], 0.0f) << "row " << i;
    d.sum().backward();
    const std::vector<float> grad = x.grad().cpu().reshape({-1}).to_vector<float>();
    EXPECT_TRUE(std::all_of(grad.begin(), grad.end(), [](float g) { return std::isfinite(g); }));
  }
  backends::cuda::matmul.allow_tf32 = saved;
}

TEST_P(Cdist, GradientAtZeroDistanceIsZeroForEveryP) {
  for (double p : {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, kInfinity}) {
    for (const char* mode : {kDirect, kProduct}) {
      Tensor a = tensor(TensorData({1.0, 2.0, -1.0}), TensorOptions(kFloat64)).reshape({1, 3}).to(dev_);
      a.requires_grad_();
      Tensor b = a.detach().clone().requires_grad_();
      Tensor d = cdist(a, b, p, mode);
      EXPECT_EQ(d.item<double>(), 0.0);
      d.sum().backward();
      EXPECT_TRUE(equal(a.grad(), zeros_like(a))) << "p=" << p << " " << mode << " " << a.grad().str();
      EXPECT_TRUE(equal(b.grad(), zeros_like(b))) << "p=" << p << " " << mode;
    }
  }
}

TEST_P(Cdist, BatchesBroadcastAndEmptyInputsGiveEmptiesOrZeros) {
  manual_seed(3);
  Tensor a = randn({2, 1, 3, 4}, TensorOptions(kFloat64).device(dev_)),
         b = randn({5, 4, 4}, TensorOptions(kFloat64).device(dev_));
  Tensor d = cdist(a, b, 1.0);
  EXPECT_EQ(d.sizes(), (IntList{2, 5, 3, 4}));
  EXPECT_TRUE(allclose(d[1][3], cdist(a[1][0], b[3], 1.0), 1e-14, 1e-14));
  // Strided inputs: the same numbers as contiguous ones.
  Tensor t = randn({4, 30}, TensorOptions(kFloat64).device(dev_));
  EXPECT_TRUE(allclose(cdist(t.t(), b[0]), cdist(t.t().contiguous(), b[0]), 1e-14, 1e-14));

  EXPECT_EQ(cdist(zeros({0, 4}, TensorOptions(dev_)), zeros({5, 4}, TensorOptions(dev_))).sizes(), (IntList{0, 5}));
  Tensor no_columns = zeros({3, 0}, TensorOptions(kFloat64).device(dev_)).requires_grad_();
  Tensor z = cdist(no_columns, zeros({5, 0}, TensorOptions(kFloat64).device(dev_)), 2.0, kProduct);
  EXPECT_EQ(z.sizes(), (IntList{3, 5}));
  EXPECT_TRUE(equal(z, zeros_like(z)));
  z.sum().backward();
  EXPECT_EQ(no_columns.grad().sizes(), (IntList{3, 0}));
}

// Large enough to be made in several blocks of 2^20 elements (Note [cdist's blocks]): a run of
// rows at a time (R * M = 2^17 elements, 8 rows a block) and a batch at a time (2^18, 4 rows:
// one batch of 4).
TEST_P(Cdist, BlocksOfLargeInputsGiveTheWholeResultAndGradient) {
  manual_seed(5);
  for (const auto& [b, p, r, m] : std::vector<std::array<int64_t, 4>>{{1, 9, 512, 256}, {2, 4, 512, 512}}) {
    Tensor x1 = randn({b, p, m}, TensorOptions(kFloat32).device(dev_)).requires_grad_();
    Tensor x2 = randn({b, r, m}, TensorOptions(kFloat32).device(dev_)).requires_grad_();
    Tensor w = randn({b, p, r}, TensorOptions(kFloat32).device(dev_));
    Tensor d = cdist(x1, x2, 1.0);
    (d * w).sum().backward();
    Tensor grad_x2 = zeros_like(x2);
    for (int64_t i = 0; i < p; ++i) {
      Tensor row = x1.detach().narrow(1, i, 1).requires_grad_(), other = x2.detach().requires_grad_();
      Tensor part = cdist(row, other, 1.0);
      EXPECT_TRUE(allclose(d.narrow(1, i, 1), part, 1e-5, 1e-4)) << "row " << i;
      auto g = autograd::grad({(part * w.narrow(1, i, 1)).sum()}, {row, other});
      EXPECT_TRUE(allclose(x1.grad().narrow(1, i, 1), g[0], 1e-5, 1e-4)) << "row " << i;
      grad_x2 = grad_x2 + g[1];
    }
    EXPECT_TRUE(allclose(x2.grad(), grad_x2, 1e-4, 1e-3));
  }
}

TEST_P(Cdist, GradcheckOnBothPaths) {
  manual_seed(11);
  for (double p : {0.5, 1.0, 1.5, 2.0, 3.0, kInfinity}) {
    for (const char* mode : {kDirect, kProduct}) {
      if (p != 2.0 && mode == kProduct) continue;
      Tensor a = randn({2, 3, 4}, TensorOptions(kFloat64).device(dev_)).requires_grad_();
      Tensor b = randn({5, 4}, TensorOptions(kFloat64).device(dev_)).requires_grad_();
      try {
        autograd::gradcheck(
            [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{cdist(x[0], x[1], p, mode)}; }, {a, b});
      } catch (const Error& e) {
        ADD_FAILURE() << "p=" << p << " " << mode << ": " << e.what();
      }
    }
  }
}

// float16 and bfloat16 take the product path (PyTorch 1.13's cpu: cdist of 30x3 and 27x3
// bfloat16 rows returns bfloat16); here it runs in float32 and rounds each distance once, so
// the result is the float32 one rounded, and the gradient comes back in the input's dtype.
// The direct path refuses them, as PyTorch's kernels do.
TEST_P(Cdist, ReducedFloatsTakeTheProductPath) {
  const Tensor a = randn({30, 3}, TensorOptions(kFloat32).device(dev_)),
               b = randn({27, 3}, TensorOptions(kFloat32).device(dev_));
  for (DType dtype : {kFloat16, kBFloat16}) {
    const Tensor x1 = a.to(dtype).requires_grad_(), x2 = b.to(dtype);
    const Tensor out = cdist(x1, x2);
    EXPECT_EQ(out.dtype(), dtype);
    EXPECT_TRUE(equal(out, cdist(x1.detach().to(kFloat32), x2.to(kFloat32)).to(dtype))) << dtype_name(dtype);
    out.sum().backward();
    EXPECT_EQ(x1.grad().dtype(), dtype);
    EXPECT_EQ(error_of<TypeError>([&] { cdist(x1.narrow(0, 0, 5), x2.narrow(0, 0, 5)); }),
              std::string("\"cdist\" not implemented for '") + (dtype == kFloat16 ? "Half" : "BFloat16") + "'");
    EXPECT_EQ(error_of<TypeError>([&] { cdist(x1, x2, 1.0); }),
              std::string("\"cdist\" not implemented for '") + (dtype == kFloat16 ? "Half" : "BFloat16") + "'");
  }
}

// A result beyond memory fails before any pass over the inputs, as PyTorch's (it allocates the
// result first): 2^20 x 1 rows against 2^20 x 2^20 broadcast rows would be 4 TiB of distances,
// and summing the broadcast rows alone takes hours.
TEST_P(Cdist, AResultBeyondMemoryFailsAtOnce) {
  EMBER_SKIP_UNLESS_HUGE_ALLOCATIONS_FAIL(/*host_memory=*/dev_.is_cpu());
  const int64_t n = int64_t{1} << 20;
  const Tensor x1 = zeros({1, 1, 3}, TensorOptions(kFloat32).device(dev_)).expand({n, 1, 3});
  const Tensor x2 = zeros({1, 1, 3}, TensorOptions(kFloat32).device(dev_)).expand({n, n, 3});
  EXPECT_THROW(cdist(x1, x2), OutOfMemoryError);
  EXPECT_THROW(cdist(x1, x2, 1.0), OutOfMemoryError);
  EXPECT_EQ(cdist(x1.narrow(0, 0, 2), x2.narrow(0, 0, 2).narrow(1, 0, 4)).sizes(), (IntList{2, 1, 4}));
}

EMBER_ON_DEVICES(Cdist, "cpu", "cuda:0");

// The product path's matrix product follows backends::cuda::matmul.allow_tf32 on a cuda device
// (emulated devices round as TF32 would), in the forward and in the backward; the cpu never
// rounds, nor does the direct path anywhere.
TEST(CdistTf32, TheMatmulFlagReachesTheProductPathOnCudaDevicesOnly) {
  ensure_cuda();
  manual_seed(4);
  Tensor a = randn({40, 64}), b = randn({30, 64}), w = randn({40, 30});
  const bool saved = backends::cuda::matmul.allow_tf32;
  auto run = [&](Device device, bool tf32, const char* mode) {
    backends::cuda::matmul.allow_tf32 = tf32;
    Tensor x = a.to(device, false, /*copy=*/true).requires_grad_();
    Tensor d = cdist(x, b.to(device), 2.0, mode);
    (d * w.to(device)).sum().backward();
    return std::make_pair(d.detach().cpu(), x.grad().cpu());
  };
  const Device cuda("cuda:0"), cpu(kCPU);
  auto cuda_off = run(cuda, false, kProduct), cuda_on = run(cuda, true, kProduct);
  auto cpu_off = run(cpu, false, kProduct), cpu_on = run(cpu, true, kProduct);
  auto direct_off = run(cuda, false, kDirect), direct_on = run(cuda, true, kDirect);
  backends::cuda::matmul.allow_tf32 = saved;
  EXPECT_FALSE(equal(cuda_on.first, cuda_off.first));
  EXPECT_FALSE(equal(cuda_on.second, cuda_off.second));
  EXPECT_TRUE(allclose(cuda_on.first, cuda_off.first, 1e-2, 1e-2));
  EXPECT_TRUE(equal(cpu_on.first, cpu_off.first));
  EXPECT_TRUE(equal(cpu_on.second, cpu_off.second));
  EXPECT_TRUE(allclose(cuda_off.first, cpu_off.first, 1e-5, 1e-5));
  EXPECT_TRUE(equal(direct_on.first, direct_off.first));
  EXPECT_TRUE(equal(direct_on.second, direct_off.second));
}

// The direct path's peak memory stays far below the [P, R, M] difference it would make at once
// (64 MiB here), forward and backward (Note [cdist's blocks]).
TEST(CdistMemory, TheDirectPathWorksInBlocks) {
  ensure_cuda();
  const Device device("cuda:0");
  Tensor x1 = randn({256, 64}, TensorOptions(device)).requires_grad_(), x2 = randn({1024, 64}, TensorOptions(device));
  cuda::synchronize();
  const size_t before = cuda::memory_allocated(0);
  cuda::reset_peak_memory_stats(0);
  Tensor d = cdist(x1, x2, 3.0);
  d.sum().backward();
  cuda::synchronize();
  const size_t full = size_t{256} * 1024 * 64 * sizeof(float);
  EXPECT_LT(cuda::max_memory_allocated(0) - before, full / 2);
}

// PyTorch's rule for the default mode: the product path for p == 2 once P or R passes 25
// rows, seen through the TF32 flag, which reaches that path only.
TEST(CdistTf32, TheDefaultModeTakesTheProductPathPast25Rows) {
  ensure_cuda();
  manual_seed(8);
  const bool saved = backends::cuda::matmul.allow_tf32;
  auto flag_matters = [&](int64_t p_rows, int64_t r_rows, double p) {
    Tensor a = randn({p_rows, 64}, TensorOptions(Device("cuda:0"))),
           b = randn({r_rows, 64}, TensorOptions(Device("cuda:0")));
    backends::cuda::matmul.allow_tf32 = true;
    Tensor on = cdist(a, b, p);
    backends::cuda::matmul.allow_tf32 = false;
    return !equal(on, cdist(a, b, p));
  };
  EXPECT_FALSE(flag_matters(25, 25, 2.0));
  EXPECT_TRUE(flag_matters(26, 3, 2.0));
  EXPECT_TRUE(flag_matters(3, 26, 2.0));
  EXPECT_FALSE(flag_matters(26, 26, 1.0));
  backends::cuda::matmul.allow_tf32 = saved;
}

// The product path reads its masks back to the host, which a capturing stream refuses: under
// graph capture cdist takes the direct path, and the replay gives the direct path's values.
TEST(CdistCapture, AProductPathShapeIsCapturedThroughTheDirectPath) {
  ensure_cuda();
  Tensor a = randn({40, 8}, TensorOptions(Device("cuda:0"))), b = randn({30, 8}, TensorOptions(Device("cuda:0")));
  Tensor expected = cdist(a, b, 2.0, "donot_use_mm_for_euclid_dist");
  cuda::Stream side(0);
  side.wait_stream(cuda::current_stream(0));
  cuda::CUDAGraph graph;
  Tensor out;
  {
    cuda::StreamGuard guard(side);
    graph.capture_begin();
    out = cdist(a, b);  // 40 > 25 rows: the product path outside a capture
    graph.capture_end();
  }
  cuda::current_stream(0).wait_stream(side);
  graph.replay();
  EXPECT_TRUE(equal(out, expected));
}

TEST(CdistErrors, PyTorchsMessages) {
  Tensor a = zeros({3, 4}), b = zeros({5, 4});
  EXPECT_THROW_MSG(cdist(a, b, 2.0, "foo"), ValueError, "foo is not a valid value for compute_mode");
  EXPECT_THROW_MSG(cdist(zeros({4}), b), ValueError, "cdist only supports at least 2D tensors, X1 got: 1D");
  EXPECT_THROW_MSG(cdist(a, zeros({4})), ValueError, "cdist only supports at least 2D tensors, X2 got: 1D");
  EXPECT_THROW_MSG(cdist(a, zeros({5, 3})), ValueError, "X1 and X2 must have the same number of columns. X1: 4 X2: 3");
  EXPECT_THROW_MSG(cdist(a.to(kInt64), b.to(kInt64)), TypeError,
                   "cdist only supports floating-point dtypes, X1 got: Long");
  EXPECT_THROW_MSG(cdist(a, b.to(kInt64)), TypeError, "cdist only supports floating-point dtypes, X2 got: Long");
  EXPECT_THROW_MSG(cdist(a, b, -1.0), ValueError, "cdist only supports non-negative p values");
  EXPECT_THROW_MSG(cdist(a.to(kFloat16), b.to(kFloat16)), TypeError, "\"cdist\" not implemented for 'Half'");  // direct
  EXPECT_THROW_MSG(cdist(a, b.to(kFloat64)), TypeError, "expected scalar type Float but found Double");
  EXPECT_THROW_MSG(cdist(zeros({2, 3, 4}), zeros({3, 5, 4})), ValueError,
                   "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0");
  ensure_cuda();
  EXPECT_THROW_MSG(cdist(a, b.to(Device("cuda:0"))), DeviceError,
                   "X1 and X2 must have the same device type. X1: cpu X2: cuda");
  if (cuda::device_count() >= 2) {
    EXPECT_THROW_MSG(cdist(a.to(Device("cuda:0")), b.to(Device("cuda:1"))), DeviceError,
                     "device of X1 (0) must match device of X2 (1)");
  }
}

}  // namespace
}  // namespace ember::testing
