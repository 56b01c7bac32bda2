// max_pool2d's 2x2 / stride-2 fast path for dense rows against the general window walk,
// which a column-strided view of the same values takes: values and indices must be
// identical, with ties (the first maximum in window order wins) and NaNs (NaN wins); on
// the cpu and cuda:0 (emulated without a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ember/ember.h"
#include "test_support.h"

namespace ember {
namespace {

namespace F = nn::functional;

class MaxPool2x2 : public ember::testing::OnDevice {
 protected:
  void check(DType dtype);
};

TEST_P(MaxPool2x2, FastPathMatchesTheGeneralWalk) { check(kFloat32); }

// float16 and bfloat16 take the fast path through float rows (the values are exact in both).
TEST_P(MaxPool2x2, ReducedPrecisionFastPathMatchesTheGeneralWalk) {
  check(kFloat16);
  check(kBFloat16);
}

void MaxPool2x2::check(DType dtype) {
  SCOPED_TRACE(dtype_name(dtype));
  // {2, 3, 7, 43}: an odd height and width (the last row and column are dropped).
  const IntList shape{2, 3, 7, 43};
  std::vector<float> v(2 * 3 * 7 * 43 * 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7) % 5);  // many ties
  for (size_t i : {3u, 100u, 517u, 1000u, 2001u, 3333u}) v[i] = NAN;
  for (size_t i : {40u, 41u, 900u}) v[i] = -INFINITY;
  // Dense values, and the same values with every other column of a wider buffer.
  Tensor wide = tensor(v).reshape({2, 3, 7, 86}).to(TensorOptions(dtype).device(dev_));
  Tensor strided = wide.slice(3, 0, 86, 2);
  Tensor dense = strided.contiguous();
  ASSERT_EQ(dense.sizes(), shape);
  auto [fast, fast_indices] = F::max_pool2d_with_indices(dense, {2});
  auto [general, general_indices] = F::max_pool2d_with_indices(strided, {2});
  ASSERT_EQ(fast.sizes(), (IntList{2, 3, 3, 21}));
  EXPECT_EQ(fast_indices.to(Device(kCPU)).to_vector<int64_t>(), general_indices.to(Device(kCPU)).to_vector<int64_t>());
  EXPECT_EQ(fast.dtype(), dtype);
  std::vector<float> a = fast.to(Device(kCPU)).to(kFloat32).to_vector<float>();
  std::vector<float> b = general.to(Device(kCPU)).to(kFloat32).to_vector<float>();
  ASSERT_EQ(a.size(), b.size());
  int nans = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(b[i])) {
      ++nans;
      EXPECT_TRUE(std::isnan(a[i])) << "output " << i;
    } else {
      EXPECT_EQ(a[i], b[i]) << "output " << i;
    }
  }
  EXPECT_GT(nans, 0);
}

EMBER_ON_DEVICES(MaxPool2x2, "cpu", "cuda:0");

}  // namespace
}  // namespace ember
