// ember::fft on cpu and cuda devices against direct DFT sums: lengths (primes included),
// batch shapes, dims, n, norms, real transforms, round trips, promotion and errors.
#include <cmath>
#include <random>

#include "fft_reference.h"
#include "test_support.h"

using namespace ember;
using ember::testing::cdouble;
using ember::testing::max_abs_diff;
using ember::testing::reference_dft;

namespace {

class Fft : public ember::testing::OnDevice {
 protected:
  // A random complex128 tensor on the test device, and its values.
  Tensor random_complex(const IntList& shape, std::vector<cdouble>& values) {
    Tensor host = empty(shape, kComplex128);
    values.resize(static_cast<size_t>(host.numel()));
    for (auto& v : values) v = {normal_(), normal_()};
    std::copy(values.begin(), values.end(), host.data_ptr<cdouble>());
    return host.to(dev_);
  }
  double normal_() { return normal_dist_(gen_); }
  static std::vector<cdouble> C(const Tensor& t) { return t.to_vector<cdouble>(); }
  std::mt19937 gen_{42};
  std::normal_distribution<double> normal_dist_;
};

double norm_factor(const std::string& norm, bool forward, int64_t n) {
  if (norm == "ortho") return 1 / std::sqrt(double(n));
  if ((norm == "forward") == forward) return 1 / double(n);
  return 1;
}

TEST_P(Fft, AnyLengthEveryNormMatchesDirectSums) {
  for (int64_t n : {1, 2, 3, 5, 7, 8, 12, 13, 16, 17, 31, 64, 97, 100, 127}) {
    std::vector<cdouble> values;
    Tensor x = random_complex({2, 3, n}, values);
    for (const std::string norm : {"backward", "forward", "ortho"}) {
      Tensor y = fft::fft(x, std::nullopt, -1, norm);
      EXPECT_EQ(y.device(), x.device());
      EXPECT_EQ(y.dtype(), kComplex128);
      EXPECT_EQ(y.sizes(), (IntList{2, 3, n}));
      EXPECT_LT(max_abs_diff(C(y), reference_dft(values, {2, 3, n}, 2, n, -1, norm_factor(norm, true, n))), 1e-9 * n)
          << "n=" << n << " norm=" << norm;
      Tensor z = fft::ifft(x, std::nullopt, -1, norm);
      EXPECT_LT(max_abs_diff(C(z), reference_dft(values, {2, 3, n}, 2, n, +1, norm_factor(norm, false, n))), 1e-9 * n)
          << "n=" << n << " norm=" << norm;
    }
  }
}

TEST_P(Fft, BatchedOverOtherDimsForEveryDim) {
  std::vector<cdouble> values;
  const IntList shape{4, 5, 3};
  Tensor x = random_complex(shape, values);
  for (int64_t dim : {0, 1, 2, -3}) {
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Tensor y = fft::fft(x, std::nullopt, dim);
    EXPECT_EQ(y.sizes(), shape);
    EXPECT_LT(max_abs_diff(C(y), reference_dft(values, shape, d, shape[d], -1, 1)), 1e-9) << dim;
  }
  // A non-contiguous input gives the same transform as its contiguous copy.
  Tensor t = x.transpose(0, 2);
  EXPECT_LT(max_abs_diff(C(fft::fft(t, std::nullopt, 1)), C(fft::fft(t.contiguous(), std::nullopt, 1))), 1e-12);
}

TEST_P(Fft, NTrimsOrZeroPads) {
  std::vector<cdouble> values;
  Tensor x = random_complex({3, 6}, values);
  for (int64_t n : {1, 4, 6, 9, 11}) {
    Tensor y = fft::fft(x, n);
    EXPECT_EQ(y.sizes(), (IntList{3, n}));
    EXPECT_LT(max_abs_diff(C(y), reference_dft(values, {3, 6}, 1, n, -1, 1)), 1e-9) << n;
    Tensor z = fft::ifft(x, n, 0, "ortho");
    EXPECT_EQ(z.sizes(), (IntList{n, 6}));
    EXPECT_LT(max_abs_diff(C(z), reference_dft(values, {3, 6}, 0, n, +1, 1 / std::sqrt(double(n)))), 1e-9) << n;
  }
}

TEST_P(Fft, RoundTrips) {
  for (int64_t n : {1, 2, 9, 16, 101}) {
    std::vector<cdouble> values;
    Tensor x = random_complex({3, n}, values);
    for (const std::string norm : {"backward", "forward", "ortho"}) {
      EXPECT_LT(max_abs_diff(C(fft::ifft(fft::fft(x, std::nullopt, -1, norm), std::nullopt, -1, norm)), values), 1e-10);
      Tensor r = randn({3, n}, TensorOptions(kFloat64).device(dev_));
      Tensor back = fft::irfft(fft::rfft(r, std::nullopt, -1, norm), n, -1, norm);
      EXPECT_EQ(back.dtype(), kFloat64);
      EXPECT_EQ(back.sizes(), r.sizes());
      EXPECT_TRUE(back.allclose(r, 1e-9, 1e-9)) << "n=" << n << " norm=" << norm;
    }
  }
}

TEST_P(Fft, RealTransformsAreTheHermitianHalf) {
  for (int64_t n : {1, 2, 7, 10, 31}) {
    Tensor r = randn({2, n}, TensorOptions(kFloat64).device(dev_));
    const auto full = C(fft::fft(r));
    Tensor half = fft::rfft(r);
    EXPECT_EQ(half.sizes(), (IntList{2, n / 2 + 1}));
    const auto h = C(half);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t k = 0; k <= n / 2; ++k) EXPECT_LT(std::abs(h[b * (n / 2 + 1) + k] - full[b * n + k]), 1e-9);
  }
  // irfft's default n is 2 * (m - 1); it leaves its input untouched (C2R transforms clobber theirs).
  std::vector<cdouble> values;
  Tensor spectrum = random_complex({2, 5}, values);
  Tensor signal = fft::irfft(spectrum);
  EXPECT_EQ(signal.sizes(), (IntList{2, 8}));
  EXPECT_EQ(C(spectrum), values);
  // The real result equals the inverse of the Hermitian-extended spectrum.
  std::vector<cdouble> extended(16);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t k = 0; k < 8; ++k) {
      cdouble v = k <= 4 ? values[b * 5 + k] : std::conj(values[b * 5 + (8 - k)]);
      if (k == 0 || k == 4) v = v.real();  // the imaginary parts of DC and Nyquist are ignored
      extended[b * 8 + k] = v;
    }
  const auto expected = reference_dft(extended, {2, 8}, 1, 8, +1, 1.0 / 8);
  const auto got = signal.to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i].real(), 1e-10);
}

TEST_P(Fft, TwoDimensionalTransforms) {
  std::vector<cdouble> values;
  const IntList shape{2, 5, 7};
  Tensor x = random_complex(shape, values);
  auto expected = reference_dft(reference_dft(values, shape, 2, 7, -1, 1), shape, 1, 5, -1, 1);
  EXPECT_LT(max_abs_diff(C(fft::fft2(x)), expected), 1e-9);
  // s pads/trims each dim; -1 keeps a dim's size; ifft2 inverts fft2.
  auto padded = reference_dft(reference_dft(values, shape, 2, 4, -1, 1), {2, 5, 4}, 1, 6, -1, 1);
  EXPECT_LT(max_abs_diff(C(fft::fft2(x, IntList{6, 4})), padded), 1e-9);
  EXPECT_EQ(fft::fft2(x, IntList{-1, 4}).sizes(), (IntList{2, 5, 4}));
  EXPECT_LT(max_abs_diff(C(fft::ifft2(fft::fft2(x, std::nullopt, {0, 2}), std::nullopt, {0, 2})), values), 1e-10);
  auto over_0_2 = reference_dft(reference_dft(values, shape, 0, 2, -1, 1), shape, 2, 7, -1, 1);
  EXPECT_LT(max_abs_diff(C(fft::fft2(x, std::nullopt, {0, 2})), over_0_2), 1e-9);
}

TEST_P(Fft, DtypePromotion) {
  auto opts = [&](DType d) { return TensorOptions(d).device(dev_); };
  EXPECT_EQ(fft::fft(ones({4}, opts(kFloat32))).dtype(), kComplex64);
  EXPECT_EQ(fft::fft(ones({4}, opts(kFloat64))).dtype(), kComplex128);
  EXPECT_EQ(fft::fft(ones({4}, opts(kInt64))).dtype(), kComplex64);
  EXPECT_EQ(fft::fft(ones({4}, opts(kBool))).dtype(), kComplex64);
  EXPECT_EQ(fft::fft(ones({4}, opts(kComplex64))).dtype(), kComplex64);
  EXPECT_EQ(fft::rfft(ones({4}, opts(kInt32))).dtype(), kComplex64);
  EXPECT_EQ(fft::irfft(ones({3}, opts(kFloat32))).dtype(), kFloat32);
  EXPECT_EQ(fft::irfft(ones({3}, opts(kComplex128))).dtype(), kFloat64);
  // Integer input: the transform of [1, 2, 3, 4] is [10, -2+2i, -2, -2-2i].
  auto y = fft::fft(tensor({1, 2, 3, 4}, dev_)).to_vector<std::complex<float>>();
  const std::vector<std::complex<float>> expected{{10, 0}, {-2, 2}, {-2, 0}, {-2, -2}};
  for (size_t i = 0; i < 4; ++i) EXPECT_LT(std::abs(y[i] - expected[i]), 1e-5);
  // float32 precision: close to the double result.
  Tensor r = randn({3, 50}, opts(kFloat64));
  EXPECT_LT(max_abs_diff(C(fft::fft(r.to(kFloat32))), C(fft::fft(r))), 1e-4);
}

TEST_P(Fft, BadInputIsATypedErrorAndLeavesTheInputIntact) {
  Tensor x = tensor({1., 2., 3.}, dev_);
  EXPECT_THROW_MSG(fft::fft(x, 0), ValueError, "Invalid number of data points (0) specified");
  EXPECT_THROW_MSG(fft::ifft(x, -3), ValueError, "Invalid number of data points (-3) specified");
  EXPECT_THROW_MSG(fft::fft(empty({0}, dev_)), ValueError, "Invalid number of data points (0) specified");
  EXPECT_THROW_MSG(fft::irfft(tensor({1.}, dev_)), ValueError, "Invalid number of data points (0) specified");
  EXPECT_THROW(fft::fft(x, std::nullopt, 1), IndexError);
  EXPECT_THROW(fft::fft2(x), IndexError);
  EXPECT_THROW_MSG(fft::fft(tensor(1., dev_)), IndexError, "Dimension specified as -1 but tensor has no dimensions");
  EXPECT_THROW_MSG(fft::rfft(tensor(1., dev_), std::nullopt, 0), IndexError, "Dimension specified as 0");
  EXPECT_THROW_MSG(fft::fft(x, std::nullopt, -1, "sideways"), ValueError, "Invalid normalization mode: \"sideways\"");
  EXPECT_THROW_MSG(fft::rfft(x.to(kComplex64)), TypeError, "rfft expects a real input tensor, but got complex64");
  EXPECT_THROW_MSG(fft::fft(x.to(kFloat16)), TypeError, "Unsupported dtype float16");
  Tensor m = ones({3, 3}, dev_);
  EXPECT_THROW_MSG(fft::fft2(m, IntList{3}), ValueError,
                   "When given, dim and shape arguments must have the same length");
  EXPECT_THROW_MSG(fft::fft2(m, std::nullopt, {0, -2}), ValueError, "FFT dims must be unique");
  EXPECT_THROW_MSG(fft::fft2(m, IntList{3, 0}), ValueError, "Invalid number of data points (0) specified");
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{1, 2, 3}));
}

TEST_P(Fft, EmptyBatchGivesAnEmptyResult) {
  Tensor y = fft::fft(empty({0, 4}, TensorOptions(kComplex64).device(dev_)));
  EXPECT_EQ(y.sizes(), (IntList{0, 4}));
  EXPECT_EQ(y.dtype(), kComplex64);
}

EMBER_ON_DEVICES(Fft, "cpu", "cuda:0", "cuda:1");

// An FFT runs on its tensor's device whatever the current device is.
TEST(FftDevices, RunsOnTheInputsDevice) {
  EMBER_REQUIRE_DEVICES(2);
  Tensor x = ones({8}, TensorOptions(kComplex64).device("cuda:1"));
  cuda::DeviceGuard guard(0);
  Tensor y = fft::fft(x);
  EXPECT_EQ(y.device(), Device("cuda:1"));
  auto v = y.to_vector<std::complex<float>>();
  EXPECT_NEAR(v[0].real(), 8, 1e-5);
  for (size_t i = 1; i < v.size(); ++i) EXPECT_LT(std::abs(v[i]), 1e-5);
}

}  // namespace
