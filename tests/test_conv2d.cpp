// ember::conv2d on cpu and cuda devices against a direct loop: strides, padding, dilation,
// groups, bias, unbatched input, and typed errors for shapes that do not fit.
#include <random>

#include "test_support.h"

using namespace ember;

namespace {

struct ConvCase {
  IntList input, weight;
  IntList stride, padding, dilation;
  int64_t groups;
  bool bias;
};

// out[n, o, y, x] = bias[o] + sum_{c in group(o), i, j} in[n, c, y*s - p + i*d, x*s - p + j*d] * w[o, c', i, j]
std::vector<double> direct_conv(const std::vector<double>& in, const IntList& is, const std::vector<double>& w,
                                const IntList& ws, const std::vector<double>& bias, const ConvCase& c, IntList& os) {
  const int64_t N = is[0], C = is[1], H = is[2], W = is[3], O = ws[0], Cg = ws[1], KH = ws[2], KW = ws[3];
  auto at = [](const IntList& v, size_t i) { return v.size() == 1 ? v[0] : v[i]; };
  const int64_t sh = at(c.stride, 0), sw = at(c.stride, 1), ph = at(c.padding, 0), pw = at(c.padding, 1);
  const int64_t dh = at(c.dilation, 0), dw = at(c.dilation, 1);
  const int64_t OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1, OW = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
  os = {N, O, OH, OW};
  std::vector<double> out(static_cast<size_t>(N * O * OH * OW));
  const int64_t Og = O / c.groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t x = 0; x < OW; ++x) {
          double sum = bias.empty() ? 0 : bias[o];
          for (int64_t cg = 0; cg < Cg; ++cg) {
            const int64_t ch = (o / Og) * Cg + cg;
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j) {
                const int64_t yy = y * sh - ph + i * dh, xx = x * sw - pw + j * dw;
                if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
                sum += in[((n * C + ch) * H + yy) * W + xx] * w[((o * Cg + cg) * KH + i) * KW + j];
              }
          }
          out[((n * O + o) * OH + y) * OW + x] = sum;
        }
  return out;
}

class Conv2d : public ember::testing::OnDevice {
 protected:
  Tensor random(const IntList& shape, std::vector<double>& values) {
    Tensor host = empty(shape, kFloat64);
    values.resize(static_cast<size_t>(host.numel()));
    for (auto& v : values) v = normal_(gen_);
    std::copy(values.begin(), values.end(), host.data_ptr<double>());
    return host.to(dev_);
  }
  std::mt19937 gen_{7};
  std::normal_distribution<double> normal_;
};

TEST_P(Conv2d, MatchesDirectLoop) {
  const std::vector<ConvCase> cases{
      {{2, 3, 7, 6}, {4, 3, 3, 3}, {1}, {0}, {1}, 1, false},
      {{2, 3, 7, 6}, {4, 3, 3, 2}, {2, 1}, {1, 2}, {1}, 1, true},
      {{1, 4, 9, 9}, {6, 2, 3, 3}, {1}, {2}, {2, 3}, 2, true},
      {{3, 6, 5, 8}, {6, 1, 2, 3}, {3, 2}, {1, 0}, {1, 2}, 6, false},  // depthwise
      {{2, 5, 4, 4}, {3, 5, 1, 1}, {1}, {0}, {1}, 1, true},            // 1x1: no unfolding
      {{1, 2, 3, 3}, {2, 2, 3, 3}, {1}, {0}, {1}, 1, false},           // kernel = input
      {{2, 4, 6, 6}, {4, 4, 1, 1}, {2}, {1}, {1}, 1, false},           // 1x1 with stride and padding
  };
  for (const auto& c : cases) {
    std::vector<double> in, w, b;
    Tensor input = random(c.input, in), weight = random(c.weight, w);
    Tensor bias = c.bias ? random({c.weight[0]}, b) : Tensor();
    IntList out_shape;
    const auto expected = direct_conv(in, c.input, w, c.weight, b, c, out_shape);
    Tensor out = conv2d(input, weight, bias, c.stride, c.padding, c.dilation, c.groups);
    EXPECT_EQ(out.device(), dev_);
    EXPECT_EQ(out.dtype(), kFloat64);
    ASSERT_EQ(out.sizes(), out_shape);
    const auto got = out.to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], 1e-10) << "case with input " << c.input[1];

    // float32 without TF32 agrees to float32 accuracy.
    backends::cudnn.allow_tf32 = false;
    const auto got32 = conv2d(input.to(kFloat32), weight.to(kFloat32), c.bias ? bias.to(kFloat32) : Tensor(), c.stride,
                              c.padding, c.dilation, c.groups)
                           .to_vector<float>();
    backends::cudnn.allow_tf32 = true;
    for (size_t i = 0; i < got32.size(); ++i) ASSERT_NEAR(got32[i], expected[i], 1e-4);
  }
}

TEST_P(Conv2d, UnbatchedInputAndNonContiguousInput) {
  std::vector<double> in, w;
  Tensor input = random({3, 6, 5}, in), weight = random({2, 3, 3, 3}, w);
  Tensor out = conv2d(input, weight, {}, {1}, {1});
  EXPECT_EQ(out.sizes(), (IntList{2, 6, 5}));
  Tensor batched = conv2d(input.unsqueeze(0), weight, {}, {1}, {1});
  EXPECT_EQ(out.to_vector<double>(), batched.to_vector<double>());
  Tensor t = input.transpose(1, 2);  // {3, 5, 6}, not contiguous
  EXPECT_EQ(conv2d(t, weight).to_vector<double>(), conv2d(t.contiguous(), weight).to_vector<double>());
}

TEST_P(Conv2d, ShapesThatDoNotFitAreTypedErrors) {
  auto o = TensorOptions(kFloat32).device(dev_);
  Tensor x = ones({2, 3, 5, 5}, o), w = ones({8, 4, 3, 3}, o);
  EXPECT_THROW_MSG(conv2d(x, w), ValueError,
                   "Given groups=1, weight of size [8, 4, 3, 3], expected input[2, 3, 5, 5] to have 4 channels, but "
                   "got 3 channels instead");
  EXPECT_THROW_MSG(conv2d(ones({2, 4, 5, 5}, o), ones({3, 2, 3, 3}, o), {}, {1}, {0}, {1}, 2), ValueError,
                   "Given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight of size "
                   "[3, 2, 3, 3] instead");
  EXPECT_THROW_MSG(conv2d(ones({1, 1, 2, 2}, o), ones({1, 1, 3, 3}, o)), ValueError,
                   "Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). Kernel size can't be "
                   "greater than actual input size");
  EXPECT_THROW_MSG(conv2d(ones({1, 1, 4, 4}, o), ones({1, 1, 2, 2}, o), {}, {1}, {0}, {4}), ValueError,
                   "Kernel size: (5 x 5)");
  EXPECT_THROW_MSG(conv2d(x, ones({4, 3, 3, 3}, o), ones({3}, o)), ValueError,
                   "expected bias to be 1-dimensional with 4 elements, but got bias of size [3] instead");
  EXPECT_THROW_MSG(conv2d(x, ones({4, 3, 3, 3}, o), {}, {0}), ValueError, "non-positive stride is not supported");
  EXPECT_THROW_MSG(conv2d(x, ones({4, 3, 3, 3}, o), {}, {1}, {-1}), ValueError, "negative padding is not supported");
  EXPECT_THROW_MSG(conv2d(x, ones({4, 3, 3, 3}, o), {}, {1}, {0}, {0}), ValueError,
                   "dilation should be greater than zero");
  EXPECT_THROW_MSG(conv2d(x, ones({4, 3, 3, 3}, o), {}, {1, 1, 1}), ValueError,
                   "expected stride to be a single integer value or a list of 2 values to match the convolution "
                   "dimensions, but got stride=[1, 1, 1]");
  EXPECT_THROW_MSG(conv2d(x, ones({4, 3, 3, 3}, o), {}, {1}, {0}, {1}, 0), ValueError,
                   "non-positive groups is not supported");
  EXPECT_THROW_MSG(conv2d(ones({5, 5}, o), w), ValueError,
                   "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [5, 5]");
  EXPECT_THROW_MSG(conv2d(x, ones({4, 3, 3}, o)), ValueError, "Expected 4-dimensional weight");
  EXPECT_THROW_MSG(conv2d(x.to(kInt64), ones({4, 3, 3, 3}, TensorOptions(kInt64).device(dev_))), TypeError,
                   "conv2d: expected a floating point input, but got int64");
  EXPECT_THROW_MSG(conv2d(x, ones({4, 3, 3, 3}, TensorOptions(kFloat64).device(dev_))), TypeError,
                   "input type (float32) and weight type (float64) should be the same");
}

EMBER_ON_DEVICES(Conv2d, "cpu", "cuda:0", "cuda:1");

TEST(Conv2dDevices, TensorsOnDifferentDevicesAreADeviceError) {
  EMBER_REQUIRE_DEVICES(2);
  EXPECT_THROW_MSG(conv2d(ones({1, 1, 3, 3}, "cuda:0"), ones({1, 1, 3, 3}, "cuda:1")), DeviceError,
                   "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1!");
  EXPECT_THROW(conv2d(ones({1, 1, 3, 3}, "cuda:0"), ones({1, 1, 3, 3}, "cuda:0"), ones({1})), DeviceError);
}

}  // namespace
