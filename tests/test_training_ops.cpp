// The tensor ops training needs (cat, stack, chunk, split, flatten, where, clamp,
// masked_fill, softmax, log_softmax, argmax, argmin, addmm, bmm), on cpu and on a cuda
// device. Expected values were computed with PyTorch 1.13 (Debian's python3-torch) on
// the same inputs; error messages are PyTorch's.
#include <cmath>
#include <complex>

#include "test_support.h"

using namespace ember;

namespace {

using Floats = std::vector<float>;
using Longs = std::vector<int64_t>;

// The (2, 3, 4) input of the PyTorch reference runs.
const Floats kX{0.5, -1.25, 3.0,  2.0,  1.5,  0.0,  -2.0, 4.5, -0.75, 2.25, 1.0, -3.5,
                2.5, 2.5,   -1.0, 0.25, -4.0, 3.75, 0.5,  1.0, 6.0,   -0.5, 2.0, 2.0};

class TrainingOps : public ember::testing::OnDevice {
 protected:
  Tensor T(const TensorData& d, DType dtype = kFloat32) { return tensor(d, TensorOptions(dtype).device(dev_)); }
  Tensor X() { return T(TensorData(std::vector<double>(kX.begin(), kX.end()))).reshape({2, 3, 4}); }
  static Floats F(const Tensor& t) { return t.to_vector<float>(); }
  static Longs I(const Tensor& t) { return t.to_vector<int64_t>(); }
  static void expect_near(const Tensor& t, const Floats& expected, float tol = 2e-6f) {
    Floats got = F(t);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], tol * (1 + std::fabs(expected[i]))) << i;
  }
};

TEST_P(TrainingOps, CatJoinsAlongADimWithPromotion) {
  auto a = T({{1, 2, 3}, {4, 5, 6}}), b = T({{7}, {8}});
  Tensor c = cat({a, b}, 1);
  EXPECT_EQ(c.sizes(), (IntList{2, 4}));
  EXPECT_EQ(c.device(), dev_);
  EXPECT_EQ(F(c), (Floats{1, 2, 3, 7, 4, 5, 6, 8}));
  EXPECT_EQ(F(cat({a, a.t().contiguous().t()}, -2)), (Floats{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
  // Non-contiguous input; int64 with float32 promotes to float32.
  Tensor ints = T({{10, 20}, {30, 40}, {50, 60}}, kInt64).t();
  Tensor mixed = cat({a, ints}, 0);
  EXPECT_EQ(mixed.dtype(), kFloat32);
  EXPECT_EQ(F(mixed), (Floats{1, 2, 3, 4, 5, 6, 10, 30, 50, 20, 40, 60}));
  // A 1-D empty tensor is skipped whatever the others' shapes, as in PyTorch.
  EXPECT_EQ(cat({T(std::vector<double>{}), a}, 0).sizes(), (IntList{2, 3}));
}

TEST_P(TrainingOps, CatAndStackErrors) {
  auto a = T({{1, 2, 3}, {4, 5, 6}}), b = T({{1, 2, 3, 4}, {5, 6, 7, 8}});
  EXPECT_THROW_MSG(cat({a, b}, 0), ValueError,
                   "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor "
                   "number 1 in the list.");
  EXPECT_THROW_MSG(cat({a, a.t()}, 1), ValueError,
                   "Sizes of tensors must match except in dimension 1. Expected size 2 but got size 3 for tensor "
                   "number 1 in the list.");
  EXPECT_THROW_MSG(cat({}, 0), ValueError, "torch.cat(): expected a non-empty list of Tensors");
  EXPECT_THROW_MSG(cat({a, a}, 2), IndexError,
                   "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  EXPECT_THROW_MSG(cat({a, T({1, 2})}, 0), ValueError, "Tensors must have same number of dimensions: got 2 and 1");
  EXPECT_THROW_MSG(cat({T(1.0), a}, 0), ValueError, "zero-dimensional tensor (at position 0) cannot be concatenated");
  EXPECT_THROW_MSG(stack({a, b}, 0), ValueError,
                   "stack expects each tensor to be equal size, but got [2, 3] at entry 0 and [2, 4] at entry 1");
  EXPECT_THROW_MSG(stack({}, 0), ValueError, "stack expects a non-empty TensorList");
  EXPECT_THROW_MSG(stack({a, a}, 3), IndexError,
                   "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
  if (dev_.is_cuda()) {
    EXPECT_THROW_MSG(cat({a, a.cpu()}, 0), DeviceError, "Expected all tensors to be on the same device");
  }
}

TEST_P(TrainingOps, StackAddsADim) {
  auto a = T({1, 2, 3}), b = T({4, 5, 6});
  Tensor s0 = stack({a, b}, 0), s1 = stack({a, b}, -1);
  EXPECT_EQ(s0.sizes(), (IntList{2, 3}));
  EXPECT_EQ(F(s0), (Floats{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(s1.sizes(), (IntList{3, 2}));
  EXPECT_EQ(F(s1), (Floats{1, 4, 2, 5, 3, 6}));
  // A collate-sized stack: 64 items of [1, 4, 4].
  std::vector<Tensor> items;
  for (int i = 0; i < 64; ++i) items.push_back(full({1, 4, 4}, i, TensorOptions(kFloat32).device(dev_)));
  Tensor batch = stack(items, 0);
  EXPECT_EQ(batch.sizes(), (IntList{64, 1, 4, 4}));
  EXPECT_EQ(batch.select(0, 37).sum().item<float>(), 37.f * 16);
}

TEST_P(TrainingOps, ChunkAndSplitAreViews) {
  Tensor x = T({0, 1, 2, 3, 4});
  auto parts = x.split(2);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(F(parts[0]), (Floats{0, 1}));
  EXPECT_EQ(F(parts[2]), (Floats{4}));
  EXPECT_EQ(static_cast<char*>(parts[1].data_ptr()) - static_cast<char*>(x.data_ptr()), 2 * 4);
  auto chunks = chunk(x, 4);  // ceil(5 / 4) = 2 per chunk: three chunks, as PyTorch
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(F(chunks[1]), (Floats{2, 3}));
  auto sized = split(X(), IntList{1, 3}, 2);
  ASSERT_EQ(sized.size(), 2u);
  EXPECT_EQ(sized[1].sizes(), (IntList{2, 3, 3}));
  EXPECT_EQ(F(sized[0]), (Floats{0.5, 1.5, -0.75, 2.5, -4.0, 6.0}));
  EXPECT_EQ(x.slice(0, 0, 0).chunk(3).size(), 3u);  // an empty dim still gives `chunks` pieces
  EXPECT_THROW_MSG(x.chunk(0), ValueError, "chunk expects `chunks` to be greater than 0, got: 0");
  EXPECT_THROW_MSG(x.split(0), ValueError,
                   "split_size can only be 0 if dimension size is 0, but got dimension size of 5");
  EXPECT_THROW_MSG(x.split(-1), ValueError, "split expects split_size be non-negative, but got split_size=-1");
  EXPECT_THROW_MSG(X().split(IntList{1, 1}, 1), ValueError,
                   "split_with_sizes expects split_sizes to sum exactly to 3 (input tensor's size at dimension 1), but "
                   "got split_sizes=[1, 1]");
}

TEST_P(TrainingOps, FlattenMergesARangeOfDims) {
  Tensor x = X();
  EXPECT_EQ(x.flatten().sizes(), (IntList{24}));
  EXPECT_EQ(x.flatten(1).sizes(), (IntList{2, 12}));
  EXPECT_EQ(x.flatten(0, 1).sizes(), (IntList{6, 4}));
  EXPECT_EQ(x.flatten(1, -1).data_ptr(), x.data_ptr());  // a view
  EXPECT_EQ(x.flatten(2, 2).sizes(), x.sizes());
  EXPECT_EQ(T(3.0).flatten().sizes(), (IntList{1}));
  Tensor t = x.transpose(1, 2);  // not viewable: copied in row-major order of t
  EXPECT_EQ(F(t.flatten(1)), F(t.contiguous().view({2, 12})));
  EXPECT_THROW_MSG(x.flatten(2, 0), ValueError, "flatten() has invalid args: start_dim cannot come after end_dim");
  EXPECT_THROW_MSG(x.flatten(3), IndexError, "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
}

TEST_P(TrainingOps, WhereSelectsWithBroadcasting) {
  Tensor x = X();
  expect_near(where(x.gt(1.0), x, T({10, 20, 30, 40})),
              {10, 20, 3, 2, 1.5, 20, 30, 4.5, 10, 2.25, 30, 40, 2.5, 2.5, 30, 40, 10, 3.75, 30, 40, 6, 20, 2, 2});
  Tensor cond = T({true, false}, kBool);
  Tensor w = where(cond, T({1, 2}, kInt64), 2.5);
  EXPECT_EQ(w.dtype(), kFloat32);
  EXPECT_EQ(F(w), (Floats{1, 2.5}));
  EXPECT_EQ(I(where(cond, 7, T({1, 2}, kInt64))), (Longs{7, 2}));
  EXPECT_EQ(where(cond, T({1, 2}, kInt32), T({3, 4}, kFloat64)).dtype(), kFloat64);
  EXPECT_THROW_MSG(where(x, x, x), TypeError,
                   "where expected condition to be a boolean tensor, but got a tensor with dtype Float");
  EXPECT_THROW_MSG(where(x.gt(0), x, T({1, 2, 3})), ValueError,
                   "The size of tensor a (4) must match the size of tensor b (3)");
}

TEST_P(TrainingOps, ClampWithScalarAndTensorBounds) {
  Tensor x = X();
  expect_near(x.clamp(-1, 2),
              {0.5, -1, 2, 2, 1.5, 0, -1, 2, -0.75, 2, 1, -1, 2, 2, -1, 0.25, -1, 2, 0.5, 1, 2, -0.5, 2, 2});
  expect_near(clamp(x, 0.5), {0.5, 0.5, 3,   2,   1.5, 0.5,  0.5, 4.5, 0.5, 2.25, 1, 0.5,
                              2.5, 2.5, 0.5, 0.5, 0.5, 3.75, 0.5, 1,   6,   0.5,  2, 2});
  expect_near(x.clamp(std::nullopt, -0.5), {-0.5, -1.25, -0.5, -0.5, -0.5, -0.5, -2,   -0.5, -0.75, -0.5, -0.5, -3.5,
                                            -0.5, -0.5,  -1,   -0.5, -4,   -0.5, -0.5, -0.5, -0.5,  -0.5, -0.5, -0.5});
  expect_near(x.clamp(T({0, -1, 1, 2}), T({{1}, {2}, {3}})),
              {0.5, -1, 1, 1, 1.5, 0, 1, 2, 0, 2.25, 1, 2, 1, 1, 1, 1, 0, 2, 1, 2, 3, -0.5, 2, 2});
  expect_near(x.transpose(0, 2).clamp(Tensor(), T(0.0)).transpose(0, 2), F(x.clamp(std::nullopt, 0.0)));
  Tensor ints = T({-3, 0, 5}, kInt64);
  EXPECT_EQ(I(ints.clamp(-1, 1)), (Longs{-1, 0, 1}));
  EXPECT_EQ(ints.clamp(0.5, 1).dtype(), kFloat32);  // as torch: result_type(tensor, min, max)
  Tensor nan = T({NAN, 5.0}).clamp(0, 1);
  EXPECT_TRUE(std::isnan(F(nan)[0]));
  EXPECT_EQ(F(nan)[1], 1.f);
  EXPECT_EQ(F(T({0.0, 5.0}).clamp(3, 1)), (Floats{1, 1}));  // min > max: every element is max
  EXPECT_THROW_MSG(x.clamp(std::nullopt, std::nullopt), ValueError,
                   "torch.clamp: At least one of 'min' or 'max' must not be None");
  EXPECT_THROW_MSG(T({1.0}, kComplex64).clamp(0, 1), TypeError, "clamp is not supported for complex types");
}

TEST_P(TrainingOps, MaskedFill) {
  Tensor x = T({{1, 2, 3}, {4, 5, 6}});
  Tensor mask = T({true, false, true}, kBool);  // broadcast over rows
  EXPECT_EQ(F(x.masked_fill(mask, -1.5)), (Floats{-1.5, 2, -1.5, -1.5, 5, -1.5}));
  EXPECT_EQ(F(masked_fill(x.t(), T({{true}, {false}, {false}}, kBool), T(9.0))), (Floats{9, 9, 2, 5, 3, 6}));
  Tensor ints = T({1, 2}, kInt64).masked_fill(T({true, false}, kBool), 7);
  EXPECT_EQ(ints.dtype(), kInt64);
  EXPECT_EQ(I(ints), (Longs{7, 2}));
  EXPECT_THROW_MSG(x.masked_fill(x, 1.0), TypeError,
                   "masked_fill_ only supports boolean masks, but got mask with dtype Float");
  EXPECT_THROW_MSG(x.masked_fill(mask, T({1.0, 2.0})), ValueError,
                   "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 dimension(s).");
}

TEST_P(TrainingOps, SoftmaxAndLogSoftmaxAlongEachDim) {
  Tensor x = X();
  expect_near(x.softmax(1), {0.24970120191574097,    0.026591645553708076, 0.8756005764007568,    0.07583466917276382,
                             0.6787582039833069,     0.09281396120786667,  0.0058997501619160175, 0.9238554239273071,
                             0.07154058665037155,    0.8805943727493286,   0.11849965155124664,   0.0003099189489148557,
                             0.029310939833521843,   0.22025802731513977,  0.03911257162690163,   0.11271920800209045,
                             4.4067215640097857e-05, 0.768775999546051,    0.17529039084911346,   0.23862656950950623,
                             0.9706449508666992,     0.010966001078486443, 0.785597026348114,     0.6486542224884033});
  expect_near(
      softmax(x, -1),
      {0.05606023594737053,  0.009741807356476784,   0.6829534769058228,   0.25124454498291016, 0.04686284810304642,
       0.010456515476107597, 0.0014151354553177953,  0.9412655234336853,   0.03716910257935524, 0.7465614080429077,
       0.21389342844486237,  0.002376141492277384,   0.4682532548904419,   0.4682532548904419,  0.014140022918581963,
       0.04935352876782417,  0.00039047206519171596, 0.9065091609954834,   0.03514917567372322, 0.0579511895775795,
       0.9632660150527954,   0.0014482118422165513,  0.017642833292484283, 0.017642833292484283});
  expect_near(
      x.log_softmax(0),
      {-2.1269280910491943,    -3.773245334625244, -0.018149960786104202, -0.16022419929504395,  -0.004078404977917671,
       -3.773245334625244,     -2.578889846801758, -0.029750416055321693, -6.7511701583862305,   -0.06196761503815651,
       -1.31326162815094,      -5.504078388214111, -0.12692804634571075,  -0.023245446383953094, -4.0181498527526855,
       -1.910224199295044,     -5.504078388214111, -0.023245446383953094, -0.07888974994421005,  -3.529750347137451,
       -0.0011701886542141438, -2.811967611312866, -0.31326165795326233,  -0.004078404977917671});
  expect_near(
      log_softmax(x, 2),
      {-2.881328582763672,    -4.631328582763672,  -0.3813285827636719,  -1.3813285827636719, -3.060529947280884,
       -4.560530185699463,    -6.560530185699463,  -0.06053003668785095, -3.2922773361206055, -0.29227742552757263,
       -1.542277455329895,    -6.0422773361206055, -0.7587460279464722,  -0.7587460279464722, -4.258746147155762,
       -3.0087461471557617,   -7.848154067993164,  -0.09815417230129242, -3.348154067993164,  -2.848154067993164,
       -0.037425655871629715, -6.537425518035889,  -4.037425518035889,   -4.037425518035889});
  // Non-contiguous input: softmax over dim 1 of x.transpose(1, 2).
  Tensor xt = x.transpose(1, 2);
  expect_near(xt.softmax(1), {0.05606023222208023,  0.04686284810304642,   0.03716910257935524,  0.009741808287799358,
                              0.010456514544785023, 0.7465614080429077,    0.6829534769058228,   0.0014151354553177953,
                              0.21389342844486237,  0.25124454498291016,   0.9412655234336853,   0.00237614125944674,
                              0.4682532548904419,   0.0003904720360878855, 0.9632660150527954,   0.4682532548904419,
                              0.9065091609954834,   0.0014482118422165513, 0.014140022918581963, 0.03514917194843292,
                              0.017642833292484283, 0.04935352876782417,   0.0579511895775795,   0.017642833292484283});
  // Large magnitudes: stable (no overflow to inf / NaN).
  Tensor big = T({{1000, 1001, 1002}, {-1000, -1001, -1002}});
  expect_near(big.softmax(1), {0.09003057330846786, 0.2447284758090973, 0.6652409434318542, 0.6652409434318542,
                               0.2447284758090973, 0.09003057330846786});
  expect_near(big.log_softmax(1), {-2.4076058864593506, -1.4076058864593506, -0.40760594606399536, -0.40760594606399536,
                                   -1.4076058864593506, -2.4076058864593506});
  // float64 and a wide row take the other paths; each row sums to 1.
  Tensor wide = arange(3000, TensorOptions(kFloat64).device(dev_)).reshape({3, 1000}) * 0.01;
  EXPECT_TRUE(wide.softmax(1).sum(1).allclose(ones({3}, TensorOptions(kFloat64).device(dev_)), 1e-12, 1e-12));
  EXPECT_EQ(T(3.0).softmax(0).item<float>(), 1.f);
  // Half precision computes in float and rounds once.
  for (DType half : {kFloat16, kBFloat16}) {
    Tensor h = x.to(half).log_softmax(1);
    EXPECT_EQ(h.dtype(), half);
    EXPECT_TRUE(h.to(kFloat32).allclose(x.log_softmax(1), 1e-2, 1e-2)) << half;
  }
  EXPECT_THROW_MSG(T({1, 2}, kInt64).softmax(0), TypeError,
                   "\"softmax_lastdim_kernel_impl\" not implemented for 'Long'");
  EXPECT_THROW_MSG(x.softmax(3), IndexError, "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
}

TEST_P(TrainingOps, ArgMaxAndArgMinTakeTheFirstIndex) {
  Tensor x = X();
  EXPECT_EQ(I(x.argmax(1)), (Longs{1, 2, 0, 1, 2, 1, 2, 2}));
  EXPECT_EQ(I(argmin(x, 2)), (Longs{1, 2, 3, 2, 0, 1}));
  EXPECT_EQ(I(x.argmax(2)), (Longs{2, 3, 1, 0, 1, 0}));  // ties (2.5, 2.5) and (2.0, 2.0): first index
  EXPECT_EQ(x.argmax().item<int64_t>(), 20);
  EXPECT_EQ(argmin(x).item<int64_t>(), 16);
  EXPECT_EQ(x.argmax(1, true).sizes(), (IntList{2, 1, 4}));
  EXPECT_EQ(x.argmax(std::nullopt, true).sizes(), (IntList{1, 1, 1}));
  Tensor xt = x.transpose(1, 2);
  EXPECT_EQ(I(xt.argmax(1)), (Longs{2, 3, 1, 0, 1, 0}));
  EXPECT_EQ(xt.argmax().item<int64_t>(), 14);  // row-major index into xt, not into x's storage
  Tensor nan = T({{1, NAN, 3, NAN}});
  EXPECT_EQ(nan.argmax(1).item<int64_t>(), 1);
  EXPECT_EQ(nan.argmin(1).item<int64_t>(), 1);
  EXPECT_EQ(I(T({3, 9, 9}, kInt64).argmax(0)), (Longs{1}));
  EXPECT_THROW_MSG(zeros({0, 3}, dev_).argmax(0), IndexError,
                   "argmax(): Expected reduction dim 0 to have non-zero size.");
  EXPECT_THROW_MSG(zeros({0, 3}, dev_).argmax(), IndexError,
                   "argmax(): Expected reduction dim to be specified for input.numel() == 0.");
  EXPECT_THROW_MSG(x.argmax(3), IndexError, "Dimension out of range");
}

TEST_P(TrainingOps, AddmmAndBmm) {
  Tensor a = T({{1, 2, 3}, {4, 5, 6}}), b = T({{0.5, -1}, {2, 0}, {1, 1.5}});
  EXPECT_EQ(F(addmm(T({1, -1}), a, b)), (Floats{8.5, 2.5, 19, 4}));
  EXPECT_EQ(F(addmm(T({{1}, {2}}), a, b, 0.5, 2)), (Floats{15.5, 7.5, 37, 11}));
  Tensor bias3 = T({1, -1, 0});
  EXPECT_TRUE(addmm(bias3, b.t().contiguous().t(), a).allclose(matmul(b, a) + bias3));  // transposed storage
  Tensor b1 = arange(12, TensorOptions(kFloat32).device(dev_)).reshape({2, 2, 3});
  Tensor b2 = arange(12, TensorOptions(kFloat32).device(dev_)).reshape({2, 3, 2}) - 5;
  EXPECT_EQ(F(bmm(b1, b2)), (Floats{-5, -2, -32, -20, 67, 88, 94, 124}));
  EXPECT_THROW_MSG(addmm(T({1, 2, 3}), a, b), ValueError, "The expanded size of the tensor");
  EXPECT_THROW_MSG(addmm(T({1, -1}), a, a), ValueError, "mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)");
  EXPECT_THROW_MSG(bmm(a, a), ValueError, "batch1 must be a 3D tensor");
  EXPECT_THROW_MSG(bmm(b1, ones({3, 3, 3}, dev_)), ValueError,
                   "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [3, 3].");
}

TEST_P(TrainingOps, ComplexRandomFillsTheRealView) {
  // As PyTorch: a complex tensor is filled through view_as_real, each part normal with
  // std / sqrt(2) (randn) or uniform in [from, to) (rand).
  const TensorOptions c64 = TensorOptions(kComplex64).device(dev_);
  manual_seed(3);
  Tensor z = randn({5000}, c64);
  manual_seed(3);
  std::vector<float> parts = randn({10000}, TensorOptions(kFloat32).device(dev_)).to_vector<float>();
  EXPECT_EQ(z.dtype(), kComplex64);
  EXPECT_EQ(z.device(), dev_);
  auto values = z.to_vector<std::complex<float>>();
  double power = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_NEAR(values[i].real(), parts[2 * i] / std::sqrt(2.0f), 1e-6);
    ASSERT_NEAR(values[i].imag(), parts[2 * i + 1] / std::sqrt(2.0f), 1e-6);
    power += std::norm(values[i]);
  }
  EXPECT_NEAR(power / values.size(), 1.0, 0.06);  // E|z|^2 = 1
  for (auto v : rand({1000}, TensorOptions(kComplex128).device(dev_)).to_vector<std::complex<double>>()) {
    ASSERT_TRUE(v.real() >= 0 && v.real() < 1 && v.imag() >= 0 && v.imag() < 1) << v;
  }
  Tensor shifted = empty({4000}, c64).normal_(3.0, 0.5);
  auto sv = shifted.to_vector<std::complex<float>>();
  double re = 0, im = 0;
  for (auto v : sv) re += v.real(), im += v.imag();
  EXPECT_NEAR(re / sv.size(), 3.0, 0.05);  // the mean applies to both parts, as PyTorch
  EXPECT_NEAR(im / sv.size(), 3.0, 0.05);
  EXPECT_THROW_MSG(empty({2}, TensorOptions(kInt64).device(dev_)).normal_(), TypeError,
                   "normal_ expects a floating point or complex dtype");
}

EMBER_ON_DEVICES(TrainingOps, "cpu", "cuda:0");

}  // namespace
