// Host FFT plans run through cpu::run_fft on raw buffers, against direct DFT sums.
// (The ember::fft ops above them are tested in test_fft.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "fft/plan_cache.h"

namespace {

using ember::detail::KernelCall;
using ember::detail::OpKind;
using ember::detail::TensorArg;
using ember::detail::fft::PlanKey;
using ember::detail::fft::TransformKind;
using cd = std::complex<double>;

// Direct DFT of `batch` rows of length n: out[k] = sum_j in[j] exp(sign 2 pi i j k / n).
std::vector<cd> dft(const std::vector<cd>& in, int64_t batch, int64_t n, int sign) {
  std::vector<cd> out(in.size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t k = 0; k < n; ++k) {
      cd sum = 0;
      for (int64_t j = 0; j < n; ++j)
        sum += in[b * n + j] * std::polar(1.0, sign * 2 * std::numbers::pi * double(j * k % n) / double(n));
      out[b * n + k] = sum;
    }
  return out;
}

std::vector<cd> random_signal(size_t count, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal;
  std::vector<cd> v(count);
  for (auto& x : v) x = {normal(gen), normal(gen)};
  return v;
}

PlanKey dense_key(TransformKind kind, bool forward, ember::DType precision, ember::IntList sizes, int64_t batch) {
  PlanKey key;
  key.kind = kind;
  key.forward = forward;
  key.precision = precision;
  key.signal_sizes = std::move(sizes);
  key.batch = batch;
  auto strides = [](const ember::IntList& s) {
    ember::IntList st(s.size(), 1);
    for (size_t d = s.size() - 1; d-- > 0;) st[d] = st[d + 1] * s[d + 1];
    return st;
  };
  const auto in = key.in_sizes(), out = key.out_sizes();
  key.in_strides = strides(in);
  key.out_strides = strides(out);
  key.in_dist = in.empty() ? 1 : in[0] * key.in_strides[0];
  key.out_dist = out.empty() ? 1 : out[0] * key.out_strides[0];
  return key;
}

TensorArg arg(void* data, ember::DType dtype, int64_t count) { return TensorArg{data, dtype, {count}, {1}}; }

// Runs `key` on host buffers the way a KernelCall from the op layer does.
void run(const PlanKey& key, void* in, ember::DType in_dtype, int64_t in_count, void* out, ember::DType out_dtype,
         int64_t out_count, double scale = 1.0) {
  KernelCall call;
  call.op = OpKind::FFT;
  call.inputs.push_back(arg(in, in_dtype, in_count));
  call.outputs.push_back(arg(out, out_dtype, out_count));
  call.args = ember::detail::kargs::Fft{scale};
  call.payload = ember::detail::fft::host_plan_cache().get(key);
  ember::detail::cpu::run_fft(call);
}

double max_error(const std::vector<cd>& a, const std::vector<cd>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::abs(a[i] - b[i]));
  return e;
}

class C2CLengths : public ::testing::TestWithParam<int64_t> {};

TEST_P(C2CLengths, DoubleAndFloatMatchTheDirectSum) {
  const int64_t n = GetParam(), batch = 3;
  const auto signal = random_signal(static_cast<size_t>(n * batch), static_cast<unsigned>(n));
  for (bool forward : {true, false}) {
    const auto expected = dft(signal, batch, n, forward ? -1 : 1);
    std::vector<cd> out(signal.size());
    auto in = signal;
    run(dense_key(TransformKind::C2C, forward, ember::kFloat64, {n}, batch), in.data(), ember::kComplex128, n * batch,
        out.data(), ember::kComplex128, n * batch);
    EXPECT_LT(max_error(out, expected), 1e-9 * n) << "n=" << n;

    std::vector<std::complex<float>> in_f(signal.begin(), signal.end()), out_f(signal.size());
    run(dense_key(TransformKind::C2C, forward, ember::kFloat32, {n}, batch), in_f.data(), ember::kComplex64, n * batch,
        out_f.data(), ember::kComplex64, n * batch);
    EXPECT_LT(max_error(std::vector<cd>(out_f.begin(), out_f.end()), expected), 2e-5 * n) << "n=" << n;
  }
}

INSTANTIATE_TEST_SUITE_P(AnyLength, C2CLengths,
                         ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 16, 17, 31, 64, 97, 100, 127, 210, 257));

TEST(HostFft, ScaleIsAppliedToEveryOutputElement) {
  const int64_t n = 6, batch = 2;
  auto in = random_signal(n * batch, 1);
  const auto expected = dft(in, batch, n, -1);
  std::vector<cd> out(in.size());
  run(dense_key(TransformKind::C2C, true, ember::kFloat64, {n}, batch), in.data(), ember::kComplex128, n * batch,
      out.data(), ember::kComplex128, n * batch, 0.25);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(std::abs(out[i] - 0.25 * expected[i]), 0, 1e-12);
}

TEST(HostFft, RealToComplexKeepsTheNonNegativeFrequencies) {
  for (int64_t n : {1, 2, 5, 8, 13}) {
    const int64_t batch = 2, half = n / 2 + 1;
    std::vector<double> real(static_cast<size_t>(n * batch));
    std::vector<cd> as_complex(real.size());
    std::mt19937 gen(static_cast<unsigned>(n));
    std::normal_distribution<double> normal;
    for (size_t i = 0; i < real.size(); ++i) as_complex[i] = real[i] = normal(gen);
    const auto full = dft(as_complex, batch, n, -1);
    std::vector<cd> out(static_cast<size_t>(half * batch));
    run(dense_key(TransformKind::R2C, true, ember::kFloat64, {n}, batch), real.data(), ember::kFloat64, n * batch,
        out.data(), ember::kComplex128, half * batch);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t k = 0; k < half; ++k) EXPECT_LT(std::abs(out[b * half + k] - full[b * n + k]), 1e-10) << n;

    // ... and C2R takes them back (unnormalized: n times the signal).
    std::vector<double> back(real.size());
    run(dense_key(TransformKind::C2R, false, ember::kFloat64, {n}, batch), out.data(), ember::kComplex128, half * batch,
        back.data(), ember::kFloat64, n * batch, 1.0 / double(n));
    for (size_t i = 0; i < real.size(); ++i) EXPECT_NEAR(back[i], real[i], 1e-10) << n;
  }
}

TEST(HostFft, TwoDimensionalTransformIsRowsThenColumns) {
  const int64_t rows = 3, cols = 5;
  const auto in = random_signal(rows * cols, 7);
  // Row transforms, then column transforms (via a transpose), by direct sums.
  auto by_rows = dft(in, rows, cols, -1);
  std::vector<cd> transposed(in.size()), expected(in.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) transposed[c * rows + r] = by_rows[r * cols + c];
  const auto by_cols = dft(transposed, cols, rows, -1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) expected[r * cols + c] = by_cols[c * rows + r];

  auto input = in;
  std::vector<cd> out(in.size());
  run(dense_key(TransformKind::C2C, true, ember::kFloat64, {rows, cols}, 1), input.data(), ember::kComplex128,
      rows * cols, out.data(), ember::kComplex128, rows * cols);
  EXPECT_LT(max_error(out, expected), 1e-10);
}

TEST(HostFft, UnalignedArraysGiveTheSameResult) {
  // A tensor view with a storage offset may start off FFTW's SIMD alignment.
  const int64_t n = 64, batch = 4;
  const auto signal = random_signal(static_cast<size_t>(n * batch), 3);
  const auto expected = dft(signal, batch, n, -1);
  std::vector<std::complex<float>> in(signal.size() + 1), out(signal.size() + 1);
  const auto key = dense_key(TransformKind::C2C, true, ember::kFloat32, {n}, batch);
  for (int shift : {0, 1}) {  // aligned and unaligned runs of one plan
    std::copy(signal.begin(), signal.end(), in.begin() + shift);
    run(key, in.data() + shift, ember::kComplex64, n * batch, out.data() + shift, ember::kComplex64, n * batch);
    std::vector<cd> got(out.begin() + shift, out.begin() + shift + n * batch);
    EXPECT_LT(max_error(got, expected), 1e-4) << shift;
  }
}

TEST(HostFft, HostCacheReusesPlans) {
  auto& cache = ember::detail::fft::host_plan_cache();
  const auto key = dense_key(TransformKind::C2C, true, ember::kFloat32, {4099}, 2);
  auto first = cache.get(key);
  const int64_t created = cache.plans_created();
  EXPECT_EQ(cache.get(key), first);
  EXPECT_EQ(cache.plans_created(), created);
}

}  // namespace
