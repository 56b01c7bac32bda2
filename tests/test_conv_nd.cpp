// conv1d / conv3d, conv_transpose1d/2d/3d, the padding tags of conv1d/2d/3d and nn::Conv1d/2d/3d
// (padding modes, init, repr) against PyTorch 1.13's numbers
// (tests/conv_nd_expected.h, float64) on the cpu and emulated cuda devices:
// values, input/weight/bias gradients, double backward (gradcheck in double),
// PyTorch's errors, and TF32 under backends::cudnn.allow_tf32.
#include <cmath>
#include <functional>

#include "conv_nd_expected.h"
#include "test_support.h"

using namespace ember;
namespace F = ember::nn::functional;
namespace expected = ember::conv_nd_expected;

namespace {

int64_t numel_of(const IntList& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// sin(arange(numel) * a) * s, as tests/conv_nd_expected.py's seq.
Tensor seq(const IntList& shape, double a, double s, Device device) {
  std::vector<double> values(static_cast<size_t>(numel_of(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(static_cast<double>(i) * a) * s;
  return tensor(TensorData(values), TensorOptions(kFloat64)).reshape(shape).to(device);
}

void expect_values(const Tensor& t, const std::vector<double>& want, double tolerance, const std::string& what) {
  const auto got = t.to(Device(kCPU)).to(kFloat64).to_vector<double>();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tolerance) << what << " element " << i;
}

using ConvFn = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;

struct Case {
  const char* name;
  ConvFn conv;
  IntList input, weight;
  int64_t bias;  // its size, 0: none
  const std::vector<double>*out, *grad_input, *grad_weight, *grad_bias;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"conv1d groups stride padding dilation",
       [](auto& x, auto& w, auto& b) { return F::conv1d(x, w, b, {2}, {1}, {2}, 2); },
       {2, 4, 7},
       {6, 2, 3},
       6,
       &expected::c1_out,
       &expected::c1_gx,
       &expected::c1_gw,
       &expected::c1_gb},
      {"conv3d per-dim stride padding dilation",
       [](auto& x, auto& w, auto& b) {
         return F::conv3d(x, w, b, {1, 2, 1}, {1, 0, 1}, {1, 1, 2});
       },
       {1, 2, 3, 4, 3},
       {3, 2, 2, 2, 2},
       3,
       &expected::c3_out,
       &expected::c3_gx,
       &expected::c3_gw,
       &expected::c3_gb},
      {"conv3d groups",
       [](auto& x, auto& w, auto& b) {
         return F::conv3d(x, w, b, {1}, {0, 1, 1}, {1}, 2);
       },
       {1, 2, 2, 3, 3},
       {2, 1, 1, 2, 3},
       0,
       &expected::c3g_out,
       &expected::c3g_gx,
       &expected::c3g_gw,
       nullptr},
      {"conv1d same, even kernel",
       [](auto& x, auto& w, auto& b) { return F::conv1d(x, w, b, {1}, nn::kSame); },
       {1, 2, 6},
       {3, 2, 4},
       3,
       &expected::s1_out,
       &expected::s1_gx,
       &expected::s1_gw,
       &expected::s1_gb},
      {"conv2d same, dilated",
       [](auto& x, auto& w, auto& b) {
         return F::conv2d(x, w, b, {1}, nn::kSame, {1, 2});
       },
       {1, 2, 5, 4},
       {2, 2, 2, 3},
       0,
       &expected::s2_out,
       &expected::s2_gx,
       &expected::s2_gw,
       nullptr},
      {"conv3d same",
       [](auto& x, auto& w, auto& b) { return F::conv3d(x, w, b, {1}, nn::kSame); },
       {1, 1, 3, 4, 3},
       {2, 1, 2, 3, 2},
       2,
       &expected::s3_out,
       &expected::s3_gx,
       &expected::s3_gw,
       &expected::s3_gb},
      {"conv1d valid",
       [](auto& x, auto& w, auto& b) { return F::conv1d(x, w, b, {1}, nn::kValid); },
       {2, 2, 6},
       {3, 2, 4},
       3,
       &expected::v1_out,
       &expected::v1_gx,
       &expected::v1_gw,
       &expected::v1_gb},
      {"conv_transpose1d groups stride padding output_padding",
       [](auto& x, auto& w, auto& b) { return F::conv_transpose1d(x, w, b, {2}, {1}, {1}, 2); },
       {2, 4, 5},
       {4, 3, 3},
       6,
       &expected::t1_out,
       &expected::t1_gx,
       &expected::t1_gw,
       &expected::t1_gb},
      {"conv_transpose2d per-dim settings",
       [](auto& x, auto& w, auto& b) {
         return F::conv_transpose2d(x, w, b, {2, 1}, {0, 1}, {1, 0}, 1, {1, 2});
       },
       {1, 2, 3, 4},
       {2, 3, 2, 3},
       3,
       &expected::t2_out,
       &expected::t2_gx,
       &expected::t2_gw,
       &expected::t2_gb},
      {"conv_transpose3d",
       [](auto& x, auto& w, auto& b) {
         return F::conv_transpose3d(x, w, b, {1, 2, 2}, {1, 0, 1}, {0, 1, 0});
       },
       {1, 2, 2, 3, 2},
       {2, 2, 2, 2, 3},
       0,
       &expected::t3_out,
       &expected::t3_gx,
       &expected::t3_gw,
       nullptr},
      {"conv_transpose2d output_padding past the stride",
       [](auto& x, auto& w, auto& b) { return F::conv_transpose2d(x, w, b, {1}, {0}, {1}, 1, {2}); },
       {1, 1, 3, 3},
       {1, 1, 2, 2},
       0,
       &expected::t2d_out,
       &expected::t2d_gx,
       &expected::t2d_gw,
       nullptr},
  };
  return all;
}

class ConvNd : public ember::testing::OnDevice {
 protected:
  void TearDown() override { backends::cudnn.allow_tf32 = true; }
};

TEST_P(ConvNd, ValuesAndGradientsMatchPyTorch) {
  for (const Case& c : cases()) {
    Tensor x = seq(c.input, 0.37, 1.0, dev_).requires_grad_();
    Tensor w = seq(c.weight, 0.23, 0.5, dev_).requires_grad_();
    Tensor b = c.bias ? seq({c.bias}, 0.71, 0.3, dev_).requires_grad_() : Tensor();
    Tensor out = c.conv(x, w, b);
    EXPECT_EQ(out.device(), dev_);
    (out * seq(out.sizes(), 0.13, 1.0, dev_)).sum().backward();
    expect_values(out, *c.out, 1e-8, std::string(c.name) + " output");
    expect_values(x.grad(), *c.grad_input, 1e-8, std::string(c.name) + " input gradient");
    expect_values(w.grad(), *c.grad_weight, 1e-8, std::string(c.name) + " weight gradient");
    if (c.bias) expect_values(b.grad(), *c.grad_bias, 1e-8, std::string(c.name) + " bias gradient");

    // float32 without TF32 agrees to float32 accuracy.
    backends::cudnn.allow_tf32 = false;
    Tensor out32 =
        c.conv(x.detach().to(kFloat32), w.detach().to(kFloat32), c.bias ? b.detach().to(kFloat32) : Tensor());
    backends::cudnn.allow_tf32 = true;
    EXPECT_EQ(out32.dtype(), kFloat32);
    expect_values(out32, *c.out, 1e-5, std::string(c.name) + " float32 output");
  }
}

TEST_P(ConvNd, UnbatchedInputIsTheBatchOfOne) {
  Tensor x = seq({4, 7}, 0.37, 1.0, dev_), w = seq({6, 2, 3}, 0.23, 0.5, dev_);
  Tensor out = F::conv1d(x, w, {}, {2}, {1}, {2}, 2);
  EXPECT_EQ(out.sizes(), (IntList{6, 3}));
  expect_values(out, expected::u1_out, 1e-8, "unbatched conv1d");
  Tensor x3 = seq({2, 3, 4, 3}, 0.37, 1.0, dev_), w3 = seq({3, 2, 2, 2, 2}, 0.23, 0.5, dev_);
  EXPECT_TRUE(F::conv3d(x3, w3, {}, {1, 2, 1}).equal(F::conv3d(x3.unsqueeze(0), w3, {}, {1, 2, 1}).squeeze(0)));
}

// The first-order gradients of sum(conv(inputs)^2) with a graph, as a function gradcheck can
// differentiate: its finite differences run it under no_grad on detached inputs, so it turns
// grad mode back on and makes such inputs leaves that require grad.
autograd::GradcheckFn gradients_of(std::function<Tensor(const std::vector<Tensor>&)> conv) {
  return [conv](const std::vector<Tensor>& in) {
    AutoGradMode grad_mode(true);
    std::vector<Tensor> leaves;
    for (const Tensor& t : in) leaves.push_back(t.requires_grad() ? t : t.detach().requires_grad_());
    Tensor out = conv(leaves);
    return autograd::grad({(out * out).sum()}, leaves, {}, true, /*create_graph=*/true);
  };
}

TEST_P(ConvNd, DoubleBackwardPassesGradcheck) {
  // The gradients of the gradients, against finite differences in double.
  Tensor x = seq({1, 2, 3, 3, 4}, 0.37, 1.0, dev_).requires_grad_();
  Tensor w = seq({2, 1, 2, 1, 2}, 0.23, 0.5, dev_).requires_grad_();
  Tensor b = seq({2}, 0.71, 0.3, dev_).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck(gradients_of([](const std::vector<Tensor>& in) {
                                    return F::conv3d(in[0], in[1], in[2], {1, 2, 1}, {1, 0, 1}, {1, 1, 2}, 2);
                                  }),
                                  {x, w, b}));
  Tensor xt = seq({1, 2, 2, 3}, 0.37, 1.0, dev_).requires_grad_();
  Tensor wt = seq({2, 2, 2, 2}, 0.23, 0.5, dev_).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck(gradients_of([](const std::vector<Tensor>& in) {
                                    return F::conv_transpose2d(in[0], in[1], in[2], {2, 1}, {0, 1}, {1, 0}, 2);
                                  }),
                                  {xt, wt, seq({4}, 0.71, 0.3, dev_).requires_grad_()}));
  Tensor x1 = seq({2, 2, 6}, 0.37, 1.0, dev_).requires_grad_(), w1 = seq({2, 2, 4}, 0.23, 0.5, dev_).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck(
      gradients_of([](const std::vector<Tensor>& in) { return F::conv1d(in[0], in[1], {}, {1}, nn::kSame); }),
      {x1, w1}));
}

// Module with weights set to the test's seq values, as the expected values'
// modules.
template <typename M>
std::shared_ptr<M> module_with(std::shared_ptr<M> m, Device device) {
  m->to(kFloat64);
  {
    NoGradGuard no_grad;
    m->weight.copy_(seq(m->weight.sizes(), 0.23, 0.5, Device(kCPU)));
    if (m->bias.defined()) m->bias.copy_(seq(m->bias.sizes(), 0.71, 0.3, Device(kCPU)));
  }
  m->to(device);
  return m;
}

TEST_P(ConvNd, PaddingModesMatchPyTorch) {
  struct ModeCase {
    std::string mode;
    const std::vector<double>*out1, *grad1, *out2, *grad2;
  };
  const std::vector<ModeCase> modes = {
      {"reflect", &expected::m1_reflect_out, &expected::m1_reflect_gx, &expected::m2_reflect_out,
       &expected::m2_reflect_gx},
      {"replicate", &expected::m1_replicate_out, &expected::m1_replicate_gx, &expected::m2_replicate_out,
       &expected::m2_replicate_gx},
      {"circular", &expected::m1_circular_out, &expected::m1_circular_gx, &expected::m2_circular_out,
       &expected::m2_circular_gx},
  };
  for (const ModeCase& c : modes) {
    auto conv1 = module_with(std::make_shared<nn::Conv1d>(2, 2, 3, 1, 2, 1, 1, true, c.mode), dev_);
    Tensor x1 = seq({1, 2, 5}, 0.37, 1.0, dev_).requires_grad_();
    Tensor out1 = conv1->forward(x1);
    (out1 * seq(out1.sizes(), 0.13, 1.0, dev_)).sum().backward();
    expect_values(out1, *c.out1, 1e-8, c.mode + " Conv1d output");
    expect_values(x1.grad(), *c.grad1, 1e-8, c.mode + " Conv1d input gradient");
    // Unbatched input pads its last dim the same way.
    EXPECT_TRUE(conv1->forward(x1.detach()[0]).equal(out1.detach()[0])) << c.mode;

    auto conv2 = module_with(
        std::make_shared<nn::Conv2d>(1, 2, nn::ConvSize{2, 3}, 1, nn::ConvPadding{1, 2}, 1, 1, false, c.mode), dev_);
    Tensor x2 = seq({1, 1, 3, 4}, 0.37, 1.0, dev_).requires_grad_();
    Tensor out2 = conv2->forward(x2);
    (out2 * seq(out2.sizes(), 0.13, 1.0, dev_)).sum().backward();
    expect_values(out2, *c.out2, 1e-8, c.mode + " Conv2d output");
    expect_values(x2.grad(), *c.grad2, 1e-8, c.mode + " Conv2d input gradient");
  }
  auto conv3 = module_with(
      std::make_shared<nn::Conv3d>(1, 1, nn::ConvSize{2, 2, 3}, 1, nn::kSame, 1, 1, false, "circular"), dev_);
  expect_values(conv3->forward(seq({1, 1, 3, 3, 4}, 0.37, 1.0, dev_)), expected::m3_out, 1e-8, "Conv3d same circular");
}

TEST_P(ConvNd, ConvTransposeForwardWithOutputSize) {
  auto conv = module_with(std::make_shared<nn::ConvTranspose2d>(2, 4, 3, 2, 1), dev_);
  Tensor x = seq({1, 2, 5, 5}, 0.37, 1.0, dev_);
  expect_values(conv->forward(x, {10, 10}), expected::mt2_out, 1e-8, "ConvTranspose2d output_size");
  EXPECT_EQ(conv->forward(x).sizes(), (IntList{1, 4, 9, 9}));
  EXPECT_EQ(conv->forward(x, {1, 4, 10, 9}).sizes(), (IntList{1, 4, 10, 9}));
  EXPECT_EQ(conv->forward(x[0], {10, 10}).sizes(), (IntList{4, 10, 10}));  // unbatched
  EXPECT_THROW_MSG(conv->forward(x, {20, 20}), ValueError,
                   "requested an output size of [20, 20], but valid sizes range from [9, 9] to [10, 10] (for an "
                   "input of torch.Size([5, 5]))");
  EXPECT_THROW_MSG(conv->forward(x, {20}), ValueError,
                   "ConvTranspose2D: for 4D input, output_size must have 2 or 4 elements (got 1)");
}

TEST_P(ConvNd, Tf32FollowsTheCudnnFlagOnCudaDevicesOnly) {
  // 1 + 2^-12 is a float32 that TF32 (10 mantissa bits) rounds to 1: with TF32,
  // a window of ones sums to its size exactly; without, to size * (1 + 2^-12),
  // also exact in float32.
  const float x_value = 1.0f + std::ldexp(1.0f, -12);
  for (int64_t dims = 1; dims <= 3; ++dims) {
    IntList input_shape{1, 1}, weight_shape{1, 1};
    for (int64_t d = 0; d < dims; ++d) {
      input_shape.push_back(4);
      weight_shape.push_back(3);
    }
    const float volume = static_cast<float>(numel_of(weight_shape));
    Tensor x = full(input_shape, x_value, TensorOptions(kFloat32).device(dev_));
    Tensor w = ones(weight_shape, TensorOptions(kFloat32).device(dev_));
    auto conv = [&] {
      Tensor out = dims == 1 ? F::conv1d(x, w) : dims == 2 ? F::conv2d(x, w) : F::conv3d(x, w);
      return out.flatten()[0].item<float>();
    };
    // The transposed convolution's centre sums the whole kernel too.
    auto transposed = [&] {
      Tensor out = dims == 1   ? F::conv_transpose1d(x, w, {}, {1}, {2})
                   : dims == 2 ? F::conv_transpose2d(x, w, {}, {1}, {2})
                               : F::conv_transpose3d(x, w, {}, {1}, {2});
      return out.flatten()[0].item<float>();
    };
    backends::cudnn.allow_tf32 = true;
    EXPECT_EQ(conv(), dev_.is_cuda() ? volume : volume * x_value) << dims << "-d, flag on";
    EXPECT_EQ(transposed(), dev_.is_cuda() ? volume : volume * x_value) << dims << "-d transposed, flag on";
    backends::cudnn.allow_tf32 = false;
    EXPECT_EQ(conv(), volume * x_value) << dims << "-d, flag off";
    EXPECT_EQ(transposed(), volume * x_value) << dims << "-d transposed, flag off";
    // The matmul flag does not govern convolutions.
    backends::cuda::matmul.allow_tf32 = true;
    EXPECT_EQ(conv(), volume * x_value) << dims << "-d, only the matmul flag on";
  }
  backends::cudnn.allow_tf32 = true;
  auto module = std::make_shared<nn::Conv3d>(1, 1, 3, 1, 1, 1, 1, false, "reflect");
  {
    NoGradGuard no_grad;
    module->weight.fill_(1.0);
  }
  module->to(dev_);
  const float centre =
      module->forward(full({1, 1, 3, 3, 3}, x_value, TensorOptions(kFloat32).device(dev_))).flatten()[13].item<float>();
  EXPECT_EQ(centre, dev_.is_cuda() ? 27.0f : 27.0f * x_value);
}

// float16 and bfloat16 convolutions (Note [Half convolutions]): every case, forward and its
// three gradients, in the reduced dtype, against the same computation in float32 (TF32 off) from
// the same rounded inputs and output gradient. Products accumulate in float32 on every backend,
// so each value is within a few of the dtype's ulps of the float32 one (cuda devices round the
// product before adding the bias, and the input gradient's columns before folding them).
TEST_P(ConvNd, HalfConvolutionsAgreeWithFloat32) {
  backends::cudnn.allow_tf32 = false;
  for (DType d : {kFloat16, kBFloat16}) {
    const double ulp = d == kFloat16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
    for (const Case& c : cases()) {
      const std::string what = std::string(c.name) + (d == kFloat16 ? " float16" : " bfloat16");
      const Tensor x0 = seq(c.input, 0.37, 1.0, dev_).to(d), w0 = seq(c.weight, 0.23, 0.5, dev_).to(d);
      const Tensor b0 = c.bias ? seq({c.bias}, 0.71, 0.3, dev_).to(d) : Tensor();
      Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_();
      Tensor b = c.bias ? b0.clone().requires_grad_() : Tensor();
      Tensor out = c.conv(x, w, b);
      ASSERT_EQ(out.dtype(), d) << what;
      const Tensor upstream = seq(out.sizes(), 0.13, 1.0, dev_).to(d);
      out.backward(upstream);
      Tensor x32 = x0.to(kFloat32).requires_grad_(), w32 = w0.to(kFloat32).requires_grad_();
      Tensor b32 = c.bias ? b0.to(kFloat32).requires_grad_() : Tensor();
      Tensor out32 = c.conv(x32, w32, b32);
      out32.backward(upstream.to(kFloat32));
      // Within 4 ulps of the largest magnitude of each result (sums of a few terms).
      auto close = [&](const Tensor& got, const Tensor& want, const char* part) {
        ASSERT_EQ(got.dtype(), d) << what << " " << part;
        const double scale = want.abs().max().item<double>();
        const double error = (got.to(kFloat32) - want).abs().max().item<double>();
        EXPECT_LE(error, 4 * ulp * scale) << what << " " << part;
      };
      close(out, out32, "output");
      close(x.grad(), x32.grad(), "input gradient");
      close(w.grad(), w32.grad(), "weight gradient");
      if (c.bias) close(b.grad(), b32.grad(), "bias gradient");
    }
  }
  backends::cudnn.allow_tf32 = true;
}

// On a GPU a float16 convolution runs in float16 (Note [Half convolutions]): its columns take
// half the bytes of float32 ones and no float32 copy of the input is made; an emulated device
// widens to float32 once instead. The peak of allocated memory during one forward shows the
// route: below the float32 columns' size on a GPU, at least that size on an emulated device.
TEST(HalfConvolutionMemory, AFloat16ConvolutionStaysInFloat16OnAGpuOnly) {
  EMBER_REQUIRE_DEVICES(1);
  const Device cuda(kCUDA, 0);
  const Tensor x = randn({2, 4, 32, 32}, TensorOptions(kFloat16).device(cuda));
  const Tensor w = randn({8, 4, 3, 3}, TensorOptions(kFloat16).device(cuda));
  NoGradGuard no_grad;
  (void)F::conv2d(x, w, {}, {1}, {1});  // warm-up
  cuda::synchronize();
  const size_t before = cuda::memory_allocated(0);
  cuda::reset_peak_memory_stats(0);
  const Tensor out = F::conv2d(x, w, {}, {1}, {1});
  cuda::synchronize();
  EXPECT_EQ(out.dtype(), kFloat16);
  const size_t float32_columns = size_t{4} * 9 * 2 * 32 * 32 * 4;  // rows x N x positions x 4 bytes
  const size_t peak = cuda::max_memory_allocated(0) - before;
  if (cuda::backend_name() == "driver") {
    EXPECT_LT(peak, float32_columns) << "peak " << peak << " bytes";
    EXPECT_GE(peak, float32_columns / 2) << "the float16 columns are allocated";
  } else {
    EXPECT_GE(peak, float32_columns) << "peak " << peak << " bytes: the float32 route";
  }
}

EMBER_ON_DEVICES(ConvNd, "cpu", "cuda:0");

TEST(ConvNdErrors, BadInputIsATypedErrorWithPyTorchsMessage) {
  EXPECT_THROW_MSG(F::conv1d(zeros({1, 3, 5, 5}), zeros({4, 3, 3})), ValueError,
                   "Expected 2D (unbatched) or 3D (batched) input to conv1d, "
                   "but got input of size: [1, 3, 5, 5]");
  EXPECT_THROW_MSG(F::conv3d(zeros({1, 2, 5, 5, 5}), zeros({4, 3, 3, 3, 3})), ValueError,
                   "Given groups=1, weight of size [4, 3, 3, 3, 3], expected "
                   "input[1, 2, 5, 5, 5] to have 3 channels, "
                   "but got 2 channels instead");
  EXPECT_THROW_MSG(F::conv1d(zeros({1, 3, 3}), zeros({4, 3, 5})), ValueError,
                   "Calculated padded input size per channel: (3). Kernel "
                   "size: (5). Kernel size can't be greater "
                   "than actual input size");
  EXPECT_THROW_MSG(F::conv3d(zeros({1, 3, 3, 3, 3}), zeros({4, 3, 5, 1, 1})), ValueError,
                   "Calculated padded input size per channel: (3 x 3 x 3). "
                   "Kernel size: (5 x 1 x 1).");
  EXPECT_THROW_MSG(F::conv1d(zeros({1, 2, 5}), zeros({3, 2, 3}), {}, {1, 1}), ValueError,
                   "expected stride to be a single integer value or a list of "
                   "1 values to match the convolution "
                   "dimensions, but got stride=[1, 1]");
  EXPECT_THROW_MSG(F::conv1d(zeros({1, 2, 5}), zeros({3, 2, 3}), {}, {2}, nn::kSame), ValueError,
                   "padding='same' is not supported for strided convolutions");
  EXPECT_THROW_MSG(F::conv3d(zeros({1, 2, 5, 5, 5}), zeros({4, 2, 3, 3})), ValueError,
                   "Expected 5-dimensional weight for 5-dimensional input");
  EXPECT_THROW_MSG(nn::Conv1d(2, 3, 3, 2, nn::kSame), ValueError,
                   "padding='same' is not supported for strided convolutions");
  EXPECT_THROW_MSG(nn::Conv1d(2, 3, 3, 1, 0, 1, 1, true, "wrap"), ValueError,
                   "padding_mode must be one of {'reflect', 'replicate', "
                   "'circular', 'zeros'}, but got "
                   "padding_mode='wrap'");
  EXPECT_THROW_MSG(nn::Conv3d(2, 3, 3, 1, 0, 1, 0), ValueError, "groups must be a positive integer");
  EXPECT_THROW_MSG(nn::Conv3d(3, 4, 3, 1, 0, 1, 2), ValueError, "in_channels must be divisible by groups");
  EXPECT_THROW_MSG(nn::Conv1d(2, 3, 3, 1, 0, 1, 2), ValueError, "out_channels must be divisible by groups");

  EXPECT_THROW_MSG(F::conv_transpose2d(zeros({1, 2, 3, 3}), zeros({2, 1, 3, 3}), {}, {1}, {0}, {2}), ValueError,
                   "output padding must be smaller than either stride or dilation, but got output_padding_height: 2 "
                   "output_padding_width: 2 stride_height: 1 stride_width: 1 dilation_height: 1 dilation_width: 1");
  EXPECT_THROW_MSG(F::conv_transpose1d(zeros({1, 2, 3}), zeros({2, 1, 3}), {}, {1}, {0}, {2}), ValueError,
                   "output padding must be smaller than either stride or dilation, but got output_padding_height: 0 "
                   "output_padding_width: 2 stride_height: 1 stride_width: 1 dilation_height: 1 dilation_width: 1");
  EXPECT_THROW_MSG(F::conv_transpose3d(zeros({1, 2, 3, 3, 3}), zeros({2, 1, 3, 3, 3}), {}, {1}, {0}, {2}), ValueError,
                   "but got output_padding_depth: 2 output_padding_height: 2 output_padding_width: 2 stride_depth: 1 "
                   "stride_height: 1 stride_width: 1 dilation_depth: 1 dilation_height: 1 dilation_width: 1");
  EXPECT_THROW_MSG(F::conv_transpose1d(zeros({1, 3, 5}), zeros({4, 2, 3})), ValueError,
                   "Given transposed=1, weight of size [4, 2, 3], expected input[1, 3, 5] to have 4 channels, but got "
                   "3 channels instead");
  EXPECT_THROW_MSG(F::conv_transpose2d(zeros({1, 2, 1, 1}), zeros({2, 1, 1, 1}), {}, {1}, {0, 2}), ValueError,
                   "Given input size per channel: (1 x 1). Calculated output size per channel: (1 x -3). Output size "
                   "is too small");
  EXPECT_THROW_MSG(nn::ConvTranspose1d(2, 3, 3, 1, 0, 0, 1, true, 1, "reflect"), ValueError,
                   "Only \"zeros\" padding mode is supported for ConvTranspose1d");

  // Padding the input more than its modes allow (F.pad's messages); the module
  // is left as it was.
  nn::Conv1d reflect(1, 1, 3, 1, 3, 1, 1, true, "reflect");
  const Tensor weight_before = reflect.weight.clone();
  EXPECT_THROW_MSG(reflect.forward(zeros({1, 1, 3})), ValueError,
                   "Argument #4: Padding size should be less than the "
                   "corresponding input dimension, but got: "
                   "padding (3, 3) at dimension 2 of input [1, 1, 3]");
  EXPECT_TRUE(reflect.weight.equal(weight_before));
  nn::Conv1d circular(1, 1, 3, 1, 4, 1, 1, true, "circular");
  EXPECT_THROW_MSG(circular.forward(zeros({1, 1, 3})), ValueError,
                   "Padding value causes wrapping around more than once.");
}

TEST(ConvNdModules, ParametersInitAndReprAreTorchs) {
  manual_seed(0);
  nn::Conv3d conv(4, 6, 3, 1, 0, 1, 2);
  EXPECT_EQ(conv.weight.sizes(), (IntList{6, 2, 3, 3, 3}));
  EXPECT_EQ(conv.bias.sizes(), (IntList{6}));
  const auto params = conv.named_parameters();
  ASSERT_EQ(params.size(), 2u);
  // kaiming_uniform_(a = sqrt(5)) and the bias both have bound 1 /
  // sqrt(fan_in), fan_in = 2 * 27.
  const double bound = 1.0 / std::sqrt(54.0);
  EXPECT_LE(conv.weight.abs().max().item<float>(), bound);
  EXPECT_GT(conv.weight.abs().max().item<float>(), 0.9 * bound);
  EXPECT_LE(conv.bias.abs().max().item<float>(), bound);

  EXPECT_EQ(nn::Conv1d(2, 4, 3).repr(), "Conv1d(2, 4, kernel_size=(3,), stride=(1,))");
  EXPECT_EQ(nn::Conv3d(2, 4, {3, 1, 2}, 2, 1, 1, 1, false, "circular").repr(),
            "Conv3d(2, 4, kernel_size=(3, 1, 2), stride=(2, 2, 2), padding=(1, "
            "1, 1), bias=False, "
            "padding_mode=circular)");
  EXPECT_EQ(nn::Conv1d(2, 4, 4, 1, nn::kSame).repr(), "Conv1d(2, 4, kernel_size=(4,), stride=(1,), padding=same)");
  EXPECT_EQ(nn::Conv2d(2, 4, 3, 1, nn::kValid, 1, 1, true, "reflect").repr(),
            "Conv2d(2, 4, kernel_size=(3, 3), stride=(1, 1), padding=valid, "
            "padding_mode=reflect)");
  EXPECT_EQ(nn::ConvTranspose2d(2, 4, 3, 2, 1, 1).repr(),
            "ConvTranspose2d(2, 4, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1))");
  nn::ConvTranspose1d transposed(6, 4, 3, 1, 0, 0, 2, false, 2);
  EXPECT_EQ(transposed.repr(),
            "ConvTranspose1d(6, 4, kernel_size=(3,), stride=(1,), dilation=(2,), groups=2, bias=False)");
  EXPECT_EQ(transposed.weight.sizes(), (IntList{6, 2, 3}));  // [in, out / groups, kernel], fan_in 2 * 3
  EXPECT_LE(transposed.weight.abs().max().item<float>(), 1.0 / std::sqrt(6.0));
  EXPECT_GT(transposed.weight.abs().max().item<float>(), 0.7 / std::sqrt(6.0));
  auto copy = std::dynamic_pointer_cast<nn::Conv1d>(nn::Conv1d(2, 4, 4, 1, nn::kSame, 1, 1, true, "replicate").clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->repr(),
            "Conv1d(2, 4, kernel_size=(4,), stride=(1,), "
            "padding=same, padding_mode=replicate)");
}

}  // namespace
