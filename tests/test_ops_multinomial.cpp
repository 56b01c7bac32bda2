// multinomial: the distribution of the draws (chi-square statistics at a fixed seed, so the
// test is deterministic and cannot flake), draws without replacement distinct, zero weights
// never drawn while others remain, the same numbers on the cpu and a device for a seed, and
// PyTorch's errors. The samples are not PyTorch's (another generator).
#include <set>

#include "ops_on_devices.h"

using namespace ember;
using ember::testing::expect_ints;

namespace {

// Pearson's statistic of `counts` against `expected` probabilities over `total` draws.
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& expected, int64_t total) {
  double statistic = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * static_cast<double>(total);
    statistic += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
  }
  return statistic;
}

std::vector<int64_t> histogram(const std::vector<int64_t>& samples, size_t categories) {
  std::vector<int64_t> counts(categories, 0);
  for (int64_t s : samples) ++counts.at(static_cast<size_t>(s));
  return counts;
}

// The chi-square distribution's 0.999 quantile with 3 degrees of freedom.
constexpr double kChiSquare3 = 16.266;

class Multinomial : public ember::testing::OpsOnDevice {};

TEST_P(Multinomial, WithReplacementFollowsTheWeights) {
  // Weights need not sum to 1: these are 3 x {0.1, 0.2, 0.3, 0.4}.
  Tensor probs = T({0.3, 0.6, 0.9, 1.2}, kFloat32);
  Tensor samples = multinomial(probs, 40000, /*replacement=*/true);
  EXPECT_EQ(samples.dtype(), kInt64);
  EXPECT_EQ(samples.sizes(), (IntList{40000}));
  EXPECT_EQ(samples.device(), dev_);
  std::vector<int64_t> counts = histogram(samples.cpu().to_vector<int64_t>(), 4);
  EXPECT_LT(chi_square(counts, {0.1, 0.2, 0.3, 0.4}, 40000), kChiSquare3);
}

TEST_P(Multinomial, RowsAndZeroWeights) {
  Tensor probs = T({{0.0, 1.0, 0.0, 3.0}, {2.0, 0.0, 0.0, 0.0}});
  Tensor samples = probs.multinomial(1000, true);
  EXPECT_EQ(samples.sizes(), (IntList{2, 1000}));
  std::vector<int64_t> counts = histogram(samples[0].cpu().to_vector<int64_t>(), 4);
  EXPECT_EQ(counts[0] + counts[2], 0);
  EXPECT_GT(counts[3], counts[1]);
  expect_ints(samples[1], std::vector<int64_t>(1000, 0));
}

TEST_P(Multinomial, WithoutReplacementDrawsDistinctCategories) {
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  const int64_t rows = 4000;
  Tensor probs = T({0.1, 0.2, 0.3, 0.4}).unsqueeze(0).expand({rows, 4});
  Tensor samples = multinomial(probs, 4);
  std::vector<int64_t> all = samples.cpu().to_vector<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    std::set<int64_t> row(all.begin() + r * 4, all.begin() + r * 4 + 4);
    ASSERT_EQ(row.size(), 4u) << "row " << r;
  }
  // First draw ~ p; second draw ~ sum over i != j of p_i p_j / (1 - p_i).
  std::vector<double> second(4, 0.0);
  for (size_t j = 0; j < 4; ++j) {
    for (size_t i = 0; i < 4; ++i) second[j] += i == j ? 0.0 : p[i] * p[j] / (1 - p[i]);
  }
  EXPECT_LT(chi_square(histogram(samples.select(1, 0).cpu().to_vector<int64_t>(), 4), p, rows), kChiSquare3);
  EXPECT_LT(chi_square(histogram(samples.select(1, 1).cpu().to_vector<int64_t>(), 4), second, rows), kChiSquare3);
  // Zero weights come after every positive one, in index order.
  Tensor zeros_last = multinomial(T({0.0, 2.0, 0.0, 1.0}), 4);
  std::vector<int64_t> z = zeros_last.cpu().to_vector<int64_t>();
  EXPECT_EQ(std::set<int64_t>(z.begin(), z.begin() + 2), (std::set<int64_t>{1, 3}));
  EXPECT_EQ(z[2], 0);
  EXPECT_EQ(z[3], 2);
}

TEST_P(Multinomial, SameNumbersOnEveryBackendForASeed) {
  Tensor probs = rand({5, 37}, TensorOptions(kFloat32).device(dev_));
  for (bool replacement : {true, false}) {
    manual_seed(123);
    Tensor here = multinomial(probs, 9, replacement);
    Tensor again_here = multinomial(probs, 9, replacement);
    manual_seed(123);
    Tensor on_cpu = multinomial(probs.cpu(), 9, replacement);
    manual_seed(123);
    Tensor in_double = multinomial(probs.to(kFloat64), 9, replacement);  // float32 weights are exact in float64
    EXPECT_TRUE(here.cpu().equal(on_cpu));
    EXPECT_TRUE(here.equal(in_double));
    EXPECT_FALSE(here.equal(again_here));
  }
}

TEST_P(Multinomial, Errors) {
  EXPECT_THROW_MSG(multinomial(T({0.0, 0.0}), 1), ValueError,
                   "invalid multinomial distribution (sum of probabilities <= 0)");
  EXPECT_THROW_MSG(multinomial(T({{1.0, 1.0}, {0.0, 0.0}}), 1, true), ValueError,
                   "invalid multinomial distribution (sum of probabilities <= 0)");
  EXPECT_THROW_MSG(multinomial(T({1.0, 0.0}), 3), ValueError,
                   "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  for (double bad : {-1.0, double(NAN), double(INFINITY)}) {
    EXPECT_THROW_MSG(multinomial(T({1.0, bad}), 1), ValueError,
                     "probability tensor contains either `inf`, `nan` or element < 0");
  }
  EXPECT_THROW_MSG(multinomial(T({1, 2}, kInt64), 1), TypeError,
                   "multinomial only supports floating-point dtypes for input, got: Long");
  EXPECT_THROW_MSG(multinomial(T({{{1.0}}}), 1), ValueError, "prob_dist must be 1 or 2 dim");
  EXPECT_THROW_MSG(multinomial(T({1.0}), 0), ValueError, "cannot sample n_sample <= 0 samples");
  // With replacement, more samples than categories is fine; no rows gives no samples.
  expect_ints(multinomial(T({1.0, 0.0}), 3, true), {0, 0, 0});
  EXPECT_EQ(multinomial(T({1.0}).narrow(0, 0, 0).reshape({0, 2}), 1).sizes(), (IntList{0, 1}));
}

EMBER_ON_DEVICES(Multinomial, "cpu", "cuda:0");

}  // namespace
