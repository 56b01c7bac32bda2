// F::affine_grid: 4-D and 5-D sizes, both align_corners, a size-1 axis, values and theta's
// gradient against PyTorch 1.13 (tests/grid_sample_expected.py, generated with
// /usr/bin/python3), float64 gradcheck, float32 with the TF32 flag either way (element-wise:
// no TF32 rounding to apply), the grid feeding grid_sample, and PyTorch's errors.
#include <cmath>
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
  const char* name;
  IntList theta_shape, size;
  bool align_corners;
  const double* out;
  size_t out_n;
  const double* grad;
  size_t grad_n;
};

#define EMBER_AFFINE_CASE(Name, Align, theta_sizes, out_sizes, align)                \
  Case {                                                                             \
#Name #Align, theta_sizes, out_sizes, align, E::kAffine##Name##Align##Out,       \
        std::size(E::kAffine##Name##Align##Out), E::kAffine##Name##Align##GradTheta, \
        std::size(E::kAffine##Name##Align##GradTheta)                                \
  }

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      EMBER_AFFINE_CASE(2d, , (IntList{2, 2, 3}), (IntList{2, 3, 4, 5}), false),
      EMBER_AFFINE_CASE(2d, Aligned, (IntList{2, 2, 3}), (IntList{2, 3, 4, 5}), true),
      EMBER_AFFINE_CASE(3d, , (IntList{2, 3, 4}), (IntList{2, 1, 2, 3, 4}), false),
      EMBER_AFFINE_CASE(3d, Aligned, (IntList{2, 3, 4}), (IntList{2, 1, 2, 3, 4}), true),
      EMBER_AFFINE_CASE(2dUnitAxis, , (IntList{2, 2, 3}), (IntList{2, 3, 1, 5}), false),
      EMBER_AFFINE_CASE(2dUnitAxis, Aligned, (IntList{2, 2, 3}), (IntList{2, 3, 1, 5}), true),
  };
  return all;
}

IntList grid_shape(const IntList& size) {
  IntList shape = {size[0]};
  for (size_t d = 2; d < size.size(); ++d) shape.push_back(size[d]);
  shape.push_back(static_cast<int64_t>(size.size()) - 2);
  return shape;
}

class AffineGrid : public ember::testing::OnDevice {};

TEST_P(AffineGrid, ValuesAndGradientMatchPyTorch) {
  for (const Case& c : cases()) {
    Tensor theta = seq(c.theta_shape, 0.2, dev_).requires_grad_(true);
    Tensor grid = F::affine_grid(theta, c.size, c.align_corners);
    EXPECT_EQ(grid.sizes(), grid_shape(c.size)) << c.name;
    EXPECT_TRUE(grid.is_contiguous()) << c.name;
    EXPECT_EQ(grid.device(), dev_) << c.name;
    (grid * seq(grid.sizes(), 0.5, dev_)).sum().backward();
    expect_values(std::string(c.name) + " out", grid, c.out, c.out_n, 1e-12);
    expect_values(std::string(c.name) + " grad theta", theta.grad(), c.grad, c.grad_n, 1e-12);
  }
}

TEST_P(AffineGrid, Gradcheck) {
  for (const Case& c : cases()) {
    Tensor theta = seq(c.theta_shape, 0.2, dev_).requires_grad_(true);
    const IntList size = c.size;
    const bool align = c.align_corners;
    expect_gradcheck(c.name, [size, align](const Ts& v) { return F::affine_grid(v[0], size, align); }, {theta});
  }
}

// float32 results are PyTorch's to float32 rounding with the matmul TF32 flag off (and on the
// cpu either way); with it on, on a cuda device, theta and the coordinates enter the products
// rounded to TF32 as PyTorch's bmm rounds them (Note [affine_grid without a base grid]).
TEST_P(AffineGrid, Float32FollowsTheMatmulTf32Flag) {
  const bool saved = backends::cuda::matmul.allow_tf32;
  backends::cuda::matmul.allow_tf32 = false;
  for (const Case& c : cases()) {
    Tensor grid = F::affine_grid(seq(c.theta_shape, 0.2, dev_, kFloat32), c.size, c.align_corners);
    EXPECT_EQ(grid.dtype(), kFloat32);
    expect_values(std::string(c.name) + " float32", grid, c.out, c.out_n, 1e-6);
  }
  // 1 + 2^-20 is 1 in TF32: under TF32 this theta gives the identity's grid, without it not.
  const TensorOptions o = TensorOptions(kFloat32).device(dev_);
  const double e = 1.0 + std::ldexp(1.0, -20);
  Tensor near_identity = tensor({e, 0.0, 0.0, 0.0, e, 0.0}, o).view({1, 2, 3});
  Tensor identity = tensor({1.0, 0.0, 0.0, 0.0, 1.0, 0.0}, o).view({1, 2, 3});
  const IntList size = {1, 1, 5, 7};
  Tensor exact = F::affine_grid(near_identity, size, false);
  EXPECT_FALSE(equal(exact, F::affine_grid(identity, size, false)));
  backends::cuda::matmul.allow_tf32 = true;
  Tensor under_flag = F::affine_grid(near_identity, size, false);
  if (dev_.is_cuda()) {
    EXPECT_TRUE(equal(under_flag, F::affine_grid(identity, size, false)));
    EXPECT_TRUE(allclose(under_flag, exact, 1e-3, 1e-3));
  } else {
    EXPECT_TRUE(equal(under_flag, exact));  // the cpu never rounds to TF32
  }
  // The gradient with respect to theta is the unrounded one: sums of the coordinates.
  Tensor theta = near_identity.clone().requires_grad_(true);
  F::affine_grid(theta, size, false).sum().backward();
  backends::cuda::matmul.allow_tf32 = false;
  Tensor theta_exact = near_identity.clone().requires_grad_(true);
  F::affine_grid(theta_exact, size, false).sum().backward();
  EXPECT_TRUE(allclose(theta.grad(), theta_exact.grad(), 1e-3, 1e-3));
  backends::cuda::matmul.allow_tf32 = saved;
}

TEST_P(AffineGrid, IdentityGridSamplesTheInputBack) {
  const TensorOptions o = TensorOptions(kFloat64).device(dev_);
  Tensor theta = tensor({1.0, 0.0, 0.0, 0.0, 1.0, 0.0}, o).view({1, 2, 3});
  Tensor x = seq({1, 2, 4, 5}, 0.3, dev_);
  for (bool align : {false, true}) {
    Tensor y = F::grid_sample(x, F::affine_grid(theta, {1, 2, 4, 5}, align), "bilinear", "zeros", align);
    EXPECT_TRUE(allclose(y, x, 1e-12, 1e-12)) << align;
  }
}

TEST_P(AffineGrid, ErrorsAreTorchs) {
  const TensorOptions o = TensorOptions(kFloat64).device(dev_);
  EXPECT_THROW_MSG(F::affine_grid(zeros({2, 2, 3}, TensorOptions(kInt64).device(dev_)), {2, 3, 4, 5}), TypeError,
                   "Expected theta to have floating point type, but got torch.int64");
  EXPECT_THROW_MSG(F::affine_grid(zeros({2, 3, 3}, o), {2, 3, 4, 5}), ValueError,
                   "Expected a batch of 2D affine matrices of shape Nx2x3 for size (2, 3, 4, 5). Got "
                   "torch.Size([2, 3, 3]).");
  EXPECT_THROW_MSG(F::affine_grid(zeros({2, 2, 3}, o), {2, 3, 4, 5, 6}), ValueError,
                   "Expected a batch of 3D affine matrices of shape Nx3x4 for size (2, 3, 4, 5, 6). Got "
                   "torch.Size([2, 2, 3]).");
  EXPECT_THROW_MSG(F::affine_grid(zeros({2, 2, 3}, o), {2, 3, 4}), ValueError,
                   "affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, respectively. Got "
                   "size (2, 3, 4).");
  EXPECT_THROW_MSG(F::affine_grid(zeros({2, 2, 3}, o), {2, 3, 0, 5}), ValueError,
                   "Expected non-zero, positive output size. Got (2, 3, 0, 5)");
  EXPECT_THROW_MSG(F::affine_grid(zeros({2, 2, 3}, o), {3, 3, 4, 5}), ValueError,
                   "Expected size for first two dimensions of batch2 tensor to be: [3, 3] but got: [2, 3].");
}

EMBER_ON_DEVICES(AffineGrid, "cpu", "cuda:0");

}  // namespace
