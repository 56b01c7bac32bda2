// F::grid_sample: every mode x padding x align_corners combination, 4-D and 5-D, values and
// both gradients against PyTorch 1.13 (tests/grid_sample_expected.py, generated with
// /usr/bin/python3), float64 gradcheck, nearest's half-to-even rounding, far and non-finite
// grid values, float16 and bfloat16, PyTorch's errors, and the backward's determinism: the same bits run after run
// on a cuda device, and the cpu's.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ember/nn/functional/sampling.h"
#include "grid_sample_expected.h"
#include "transformer_test_util.h"

using namespace ember;
using ember::testing::expect_gradcheck;
using ember::testing::expect_values;
using ember::testing::seq;
namespace E = grid_sample_expected;
namespace F = ember::nn::functional;

namespace {

using Ts = std::vector<Tensor>;

struct Case {
  int dims;  // spatial dims
  const char* mode;
  const char* padding;
  bool align_corners;
  const double* out;
  size_t out_n;
  const double* grad_input;
  size_t grad_input_n;
  const double* grad_grid;
  size_t grad_grid_n;
};

#define EMBER_GRID_CASE(D, Mode, Pad, Align, mode, pad, align)                                            \
  Case {                                                                                                  \
    D, mode, pad, align, E::k##D##d##Mode##Pad##Align##Out, std::size(E::k##D##d##Mode##Pad##Align##Out), \
        E::k##D##d##Mode##Pad##Align##GradInput, std::size(E::k##D##d##Mode##Pad##Align##GradInput),      \
        E::k##D##d##Mode##Pad##Align##GradGrid, std::size(E::k##D##d##Mode##Pad##Align##GradGrid)         \
  }
#define EMBER_GRID_PADDINGS(D, Mode, mode)                               \
  EMBER_GRID_CASE(D, Mode, Zeros, , mode, "zeros", false),               \
      EMBER_GRID_CASE(D, Mode, Zeros, Aligned, mode, "zeros", true),     \
      EMBER_GRID_CASE(D, Mode, Border, , mode, "border", false),         \
      EMBER_GRID_CASE(D, Mode, Border, Aligned, mode, "border", true),   \
      EMBER_GRID_CASE(D, Mode, Reflection, , mode, "reflection", false), \
      EMBER_GRID_CASE(D, Mode, Reflection, Aligned, mode, "reflection", true)

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      EMBER_GRID_PADDINGS(2, Bilinear, "bilinear"), EMBER_GRID_PADDINGS(2, Nearest, "nearest"),
      EMBER_GRID_PADDINGS(2, Bicubic, "bicubic"),   EMBER_GRID_PADDINGS(3, Bilinear, "bilinear"),
      EMBER_GRID_PADDINGS(3, Nearest, "nearest"),
  };
  return all;
}

// The script's shapes: input seq(.1), grid seq(.7) * 1.3.
IntList input_shape(int dims) { return dims == 2 ? IntList{2, 2, 3, 4} : IntList{1, 2, 2, 3, 4}; }
IntList grid_shape(int dims) { return dims == 2 ? IntList{2, 2, 3, 2} : IntList{1, 2, 2, 2, 3}; }

std::string describe(const Case& c) {
  return std::to_string(c.dims) + "-D " + c.mode + " " + c.padding + (c.align_corners ? " aligned" : "");
}

class GridSample : public ember::testing::OnDevice {};

TEST_P(GridSample, EveryModePaddingAndAlignmentMatchesPyTorch) {
  for (const Case& c : cases()) {
    Tensor x = seq(input_shape(c.dims), 0.1, dev_).requires_grad_(true);
    Tensor g = (seq(grid_shape(c.dims), 0.7, dev_) * 1.3).detach().requires_grad_(true);
    Tensor y = F::grid_sample(x, g, c.mode, c.padding, c.align_corners);
    EXPECT_EQ(y.device(), dev_);
    (y * seq(y.sizes(), 0.5, dev_)).sum().backward();
    expect_values(describe(c) + " out", y, c.out, c.out_n, 1e-10);
    expect_values(describe(c) + " grad input", x.grad(), c.grad_input, c.grad_input_n, 1e-10);
    expect_values(describe(c) + " grad grid", g.grad(), c.grad_grid, c.grad_grid_n, 1e-10);
  }
}

// Only the input, or only the grid, requiring grad: the backward computes that one alone.
TEST_P(GridSample, EitherGradientAlone) {
  const Case& c = cases().front();  // 2-D bilinear zeros
  Tensor x = seq(input_shape(c.dims), 0.1, dev_).requires_grad_(true);
  Tensor g = seq(grid_shape(c.dims), 0.7, dev_) * 1.3;
  Tensor y = F::grid_sample(x, g, c.mode, c.padding, c.align_corners);
  (y * seq(y.sizes(), 0.5, dev_)).sum().backward();
  expect_values("grad input alone", x.grad(), c.grad_input, c.grad_input_n, 1e-10);
  Tensor x2 = seq(input_shape(c.dims), 0.1, dev_), g2 = g.detach().requires_grad_(true);
  Tensor y2 = F::grid_sample(x2, g2, c.mode, c.padding, c.align_corners);
  (y2 * seq(y2.sizes(), 0.5, dev_)).sum().backward();
  expect_values("grad grid alone", g2.grad(), c.grad_grid, c.grad_grid_n, 1e-10);
  EXPECT_FALSE(x2.grad().defined());
}

TEST_P(GridSample, Float32AndStridedOperands) {
  for (const Case& c : cases()) {
    // A transposed input and a grid sliced from a wider one: the same values as contiguous ones.
    Tensor x = seq(input_shape(c.dims), 0.1, dev_, kFloat32).transpose(2, 3).contiguous().transpose(2, 3);
    ASSERT_FALSE(x.is_contiguous());
    Tensor g = seq(grid_shape(c.dims), 0.7, dev_, kFloat32) * 1.3;
    IntList wide_shape = grid_shape(c.dims);
    wide_shape.back() *= 2;
    const auto last = static_cast<int64_t>(wide_shape.size()) - 1;
    Tensor wide = ember::stack({g, zeros_like(g)}, last + 1).reshape(wide_shape).slice(last, 0, wide_shape.back(), 2);
    ASSERT_FALSE(wide.is_contiguous());
    Tensor y = F::grid_sample(x, wide, c.mode, c.padding, c.align_corners);
    EXPECT_EQ(y.dtype(), kFloat32);
    expect_values(describe(c) + " float32 out", y, c.out, c.out_n, 1e-5);
  }
}

// float16 and bfloat16, as PyTorch 2.x's kernels take them: computed in float32 from the rounded
// input and grid and rounded once, gradients in the operands' dtypes; under autocast(cuda) a
// float16 input and grid stay float16 (grid_sample's policy promotes).
TEST_P(GridSample, ReducedFloatsComputeInFloat32AndRoundOnce) {
  for (DType dtype : {kFloat16, kBFloat16}) {
    for (const Case& c : cases()) {
      const Tensor x = seq(input_shape(c.dims), 0.1, dev_, kFloat32).to(dtype).requires_grad_(true);
      const Tensor g = (seq(grid_shape(c.dims), 0.7, dev_, kFloat32) * 1.3).to(dtype).requires_grad_(true);
      const Tensor y = F::grid_sample(x, g, c.mode, c.padding, c.align_corners);
      const std::string what = describe(c) + " " + dtype_name(dtype);
      EXPECT_EQ(y.dtype(), dtype) << what;
      const Tensor x32 = x.detach().to(kFloat32).requires_grad_(true),
                   g32 = g.detach().to(kFloat32).requires_grad_(true);
      const Tensor y32 = F::grid_sample(x32, g32, c.mode, c.padding, c.align_corners);
      EXPECT_TRUE(equal(y.detach(), y32.detach().to(dtype))) << what;
      const Tensor probe = seq(y.sizes(), 0.3, dev_, kFloat32);
      (y * probe.to(dtype)).sum().backward();
      (y32 * probe.to(dtype).to(kFloat32)).sum().backward();
      EXPECT_EQ(x.grad().dtype(), dtype) << what;
      EXPECT_EQ(g.grad().dtype(), dtype) << what;
      EXPECT_TRUE(equal(x.grad(), x32.grad().to(dtype))) << what;
    }
  }
  if (!dev_.is_cuda()) return;
  ember::autocast guard(kCUDA);
  const Tensor x = seq({1, 2, 3, 4}, 0.1, dev_, kFloat32).to(kFloat16);
  const Tensor g = (seq({1, 2, 2, 2}, 0.7, dev_, kFloat32) * 0.9).to(kFloat16);
  EXPECT_EQ(F::grid_sample(x, g).dtype(), kFloat16);
  EXPECT_EQ(F::grid_sample(x, g.to(kFloat32)).dtype(), kFloat32);
}

TEST_P(GridSample, GradcheckInFloat64) {
  for (const Case& c : cases()) {
    Tensor x = seq(input_shape(c.dims), 0.1, dev_).requires_grad_(true);
    Tensor g = (seq(grid_shape(c.dims), 0.7, dev_) * 1.3).detach().requires_grad_(true);
    const std::string what = describe(c);
    expect_gradcheck(what.c_str(),
                     [c](const Ts& v) { return F::grid_sample(v[0], v[1], c.mode, c.padding, c.align_corners); },
                     {x, g});
  }
}

TEST_P(GridSample, NearestRoundsHalfToEven) {
  Tensor x = arange(5.0, TensorOptions(kFloat64).device(dev_)).view({1, 1, 1, 5});
  Tensor g =
      tensor({-0.75, 0.0, -0.25, 0.0, 0.25, 0.0, 0.75, 0.0}, TensorOptions(kFloat64).device(dev_)).view({1, 1, 4, 2});
  expect_values("nearest half to even", F::grid_sample(x, g, "nearest", "zeros", true), E::kNearestHalfToEven, 4, 0);
  // 5-D: the same pixel coordinates along x.
  Tensor x3 = x.view({1, 1, 1, 1, 5});
  Tensor g3 =
      tensor({-0.75, 0.0, 0.0, -0.25, 0.0, 0.0, 0.25, 0.0, 0.0, 0.75, 0.0, 0.0}, TensorOptions(kFloat64).device(dev_))
          .view({1, 1, 1, 4, 3});
  expect_values("5-D nearest half to even", F::grid_sample(x3, g3, "nearest", "zeros", true), E::kNearestHalfToEven, 4,
                0);
}

TEST_P(GridSample, FarAndNonFiniteGridValuesStayInBounds) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      const std::string what = std::string(mode) + " " + padding;
      Tensor x = (arange(12.0, TensorOptions(kFloat64).device(dev_)) + 1.0).view({1, 1, 3, 4}).requires_grad_(true);
      // x of 1e30, -1e30, inf, -inf, NaN; y 0 (the middle row).
      Tensor g = tensor({1e30, 0.0, -1e30, 0.0, inf, 0.0, -inf, 0.0, nan, 0.0}, TensorOptions(kFloat64).device(dev_))
                     .view({1, 1, 5, 2})
                     .requires_grad_(true);
      Tensor y = F::grid_sample(x, g, mode, padding, false);
      y.sum().backward();
      const std::vector<double> v = y.detach().to(Device(kCPU)).flatten().to_vector<double>();
      const std::string p(padding), m(mode);
      if (p == "zeros" && m != "bicubic") {
        for (double value : v) EXPECT_EQ(value, 0.0) << what;  // all out of bounds (NaN as PyTorch's CUDA: -100)
      }
      if (p == "border" && m != "bicubic") {
        // Clipped to the edges; a NaN clips to 0 (fmax, as CUDA's ::max).
        EXPECT_EQ(v[0], 8.0) << what;
        EXPECT_EQ(v[1], 5.0) << what;
        EXPECT_EQ(v[2], 8.0) << what;
        EXPECT_EQ(v[3], 5.0) << what;
        EXPECT_EQ(v[4], 5.0) << what;
      }
      if (p == "reflection" && m != "bicubic") {
        for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(std::isfinite(v[i])) << what << " [" << i << "]";
      }
      EXPECT_TRUE(x.grad().defined()) << what;
      EXPECT_TRUE(g.grad().defined()) << what;
    }
  }
}

TEST_P(GridSample, NanInputPropagates) {
  Tensor x = ones({1, 1, 2, 2}, TensorOptions(kFloat64).device(dev_));
  x = ember::where(arange(4.0, TensorOptions(kFloat64).device(dev_)).view({1, 1, 2, 2}).eq(0.0),
                   full({1, 1, 2, 2}, std::numeric_limits<double>::quiet_NaN(), TensorOptions(kFloat64).device(dev_)),
                   x);
  Tensor g = zeros({1, 1, 1, 2}, TensorOptions(kFloat64).device(dev_));  // the centre: all four pixels
  EXPECT_TRUE(std::isnan(F::grid_sample(x, g).item<double>()));
}

TEST_P(GridSample, ErrorsAreTorchs) {
  const TensorOptions o = TensorOptions(kFloat64).device(dev_);
  Tensor x = zeros({2, 3, 4, 5}, o), g = zeros({2, 6, 7, 2}, o);
  EXPECT_THROW_MSG(F::grid_sample(x, g, "cubic"), ValueError,
                   "nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: "
                   "'cubic'");
  EXPECT_THROW_MSG(F::grid_sample(x, g, "bilinear", "wrap"), ValueError,
                   "nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or 'reflection', but "
                   "got: 'wrap'");
  EXPECT_THROW_MSG(F::grid_sample(x, zeros({3, 6, 7, 2}, o)), ValueError,
                   "grid_sampler(): expected grid and input to have same batch size, but got input with sizes "
                   "[2, 3, 4, 5] and grid with sizes [3, 6, 7, 2]");
  EXPECT_THROW_MSG(F::grid_sample(x, zeros({2, 6, 7, 3}, o)), ValueError,
                   "grid_sampler(): expected grid to have size 2 in last dimension, but got grid with sizes "
                   "[2, 6, 7, 3]");
  EXPECT_THROW_MSG(F::grid_sample(zeros({2, 3, 4, 5, 6}, o), zeros({2, 1, 1, 1, 3}, o), "bicubic"), ValueError,
                   "grid_sampler(): bicubic interpolation only supports 4D input");
  // PyTorch checks the grid's last dim before the ranks, and names 5D for all but 4-D input.
  EXPECT_THROW_MSG(F::grid_sample(zeros({2, 3, 4}, o), zeros({2, 3, 2}, o)), ValueError,
                   "grid_sampler(): expected grid to have size 1 in last dimension, but got grid with sizes [2, 3, 2]");
  EXPECT_THROW_MSG(F::grid_sample(zeros({2, 3, 4}, o), zeros({2, 3, 1}, o)), ValueError,
                   "grid_sampler(): expected 5D input and grid with same number of dimensions, but got input with "
                   "sizes [2, 3, 4] and grid with sizes [2, 3, 1]");
  EXPECT_THROW_MSG(F::grid_sample(zeros({2, 3, 4, 5}, o), zeros({2, 6, 2}, o)), ValueError,
                   "grid_sampler(): expected 4D input and grid with same number of dimensions, but got input with "
                   "sizes [2, 3, 4, 5] and grid with sizes [2, 6, 2]");
  EXPECT_THROW_MSG(F::grid_sample(zeros({2, 3, 0, 5}, o), g), ValueError,
                   "grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes "
                   "[2, 3, 0, 5] with dimension 2 being empty");
  EXPECT_THROW_MSG(F::grid_sample(x, g.to(kFloat32)), TypeError,
                   "grid_sampler(): expected input and grid to have same dtype, but input has double and grid has "
                   "float");
  EXPECT_THROW_MSG(F::grid_sample(x.to(kInt64), g.to(kInt64)), TypeError, "\"grid_sampler_2d_");
  if (dev_.is_cuda()) {
    EXPECT_THROW_MSG(F::grid_sample(x, g.to(Device(kCPU))), DeviceError,
                     "grid_sampler(): expected input and grid to be on same device, but input is on cuda:0 and grid "
                     "is on cpu");
  }
  // Nothing was recorded or changed by the refused calls: a good call still works.
  EXPECT_EQ(F::grid_sample(x, g).sizes(), (IntList{2, 3, 6, 7}));
}

TEST_P(GridSample, EmptyBatchAndChannels) {
  const TensorOptions o = TensorOptions(kFloat64).device(dev_);
  Tensor x = zeros({0, 2, 3, 3}, o).requires_grad_(true), g = zeros({0, 4, 4, 2}, o).requires_grad_(true);
  Tensor y = F::grid_sample(x, g);
  EXPECT_EQ(y.sizes(), (IntList{0, 2, 4, 4}));
  Tensor xc = zeros({1, 0, 3, 3}, o).requires_grad_(true), gc = zeros({1, 4, 4, 2}, o).requires_grad_(true);
  Tensor yc = F::grid_sample(xc, gc);
  EXPECT_EQ(yc.sizes(), (IntList{1, 0, 4, 4}));
}

// Many grid points land on each input pixel (a 40 x 40 grid over a 5 x 5 input): the input's
// gradient sums many contributions per element, the case where atomics' order shows.
TEST_P(GridSample, BackwardIsDeterministicAndTheCpus) {
  manual_seed(37);
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    Tensor x_cpu = randn({2, 3, 5, 5}, kFloat32);
    Tensor g_cpu = rand({2, 40, 40, 2}, kFloat32) * 2.4 - 1.2;
    Tensor go_cpu = randn({2, 3, 40, 40}, kFloat32);
    auto grads = [&](Device device) {
      Tensor x = x_cpu.to(device).requires_grad_(true), g = g_cpu.to(device).requires_grad_(true);
      Tensor y = F::grid_sample(x, g, mode, "reflection", false);
      y.backward(go_cpu.to(device));
      return std::make_pair(x.grad().to(Device(kCPU)), g.grad().to(Device(kCPU)));
    };
    const auto first = grads(dev_);
    for (int run = 0; run < 3; ++run) {
      const auto again = grads(dev_);
      EXPECT_TRUE(equal(again.first, first.first)) << mode << " run " << run;
      EXPECT_TRUE(equal(again.second, first.second)) << mode << " run " << run;
    }
    const auto cpu = grads(Device(kCPU));
    EXPECT_TRUE(allclose(first.first, cpu.first, 1e-5, 1e-5)) << mode;
    EXPECT_TRUE(allclose(first.second, cpu.second, 1e-5, 1e-5)) << mode;
    if (dev_.is_cuda() && ember::cuda::backend_name() == "emulated") {
      // Emulated devices run the cpu's bodies: the same bits.
      EXPECT_TRUE(equal(first.first, cpu.first)) << mode;
      EXPECT_TRUE(equal(first.second, cpu.second)) << mode;
    }
  }
}

EMBER_ON_DEVICES(GridSample, "cpu", "cuda:0");

}  // namespace
