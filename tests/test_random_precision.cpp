// rand, rand_like and uniform_ in float16 and bfloat16 stay in [from, to): they draw in
// the target precision (as PyTorch's uniform_real does) instead of rounding a float
// draw, which reached `to` about 3 times in 10,000 (half) and 2 in 1,000 (bfloat16).
#include <cmath>
#include <vector>

#include "test_support.h"

namespace {

using namespace ember;

std::vector<Device> devices() {
  std::vector<Device> out{Device(kCPU)};
  ember::testing::ensure_cuda();
  if (cuda::is_available()) out.emplace_back(kCUDA, 0);
  return out;
}

constexpr int64_t kDraws = 200'000;

TEST(RandomPrecision, RandIsBelowOneInHalfAndBFloat16) {
  for (Device device : devices()) {
    for (DType dtype : {kFloat16, kBFloat16}) {
      manual_seed(3);
      Tensor x = rand({kDraws}, TensorOptions(dtype).device(device));
      std::vector<float> v = x.to_vector<float>();
      const float grid = dtype == kFloat16 ? 2048.0f : 256.0f;  // 2^digits
      for (float f : v) {
        ASSERT_GE(f, 0.0f) << device << " " << dtype;
        ASSERT_LT(f, 1.0f) << device << " " << dtype;
        ASSERT_EQ(f * grid, std::floor(f * grid)) << device << " " << dtype << ": " << f;  // digits random bits
      }
      // The example: scaled to indices, the values must stay below 10.
      EXPECT_LE((x * 10).to(kInt64).max().item<int64_t>(), 9) << device << " " << dtype;
      EXPECT_LT(rand_like(x).max().item<float>(), 1.0f) << device << " " << dtype;
    }
  }
}

TEST(RandomPrecision, UniformStaysBelowToWhenNarrowingRoundsUp) {
  for (Device device : devices()) {
    for (DType dtype : {kFloat16, kBFloat16}) {
      // 1000.3 is not a bfloat16 (or half) value; values just below it round up to it or past it.
      for (auto [from, to] : {std::pair{-3.0, 5.0}, std::pair{1000.0, 1000.3}, std::pair{0.1, 0.2}}) {
        Tensor x = empty({kDraws}, TensorOptions(dtype).device(device)).uniform_(from, to);
        const float lowest = full({1}, from, dtype).item<float>();  // `from` in the dtype
        for (float f : x.to_vector<float>()) {
          ASSERT_LT(f, to) << device << " " << dtype << " [" << from << ", " << to << ")";
          ASSERT_GE(f, lowest);
        }
      }
    }
  }
}

TEST(RandomPrecision, SameNumbersOnEveryBackend) {
  std::vector<Device> ds = devices();
  if (ds.size() < 2) GTEST_SKIP() << "needs a cuda device";
  for (DType dtype : {kFloat16, kBFloat16}) {
    manual_seed(77);
    Tensor a = rand({1000}, TensorOptions(dtype));
    manual_seed(77);
    Tensor b = rand({1000}, TensorOptions(dtype).device(ds[1]));
    EXPECT_TRUE(a.equal(b.cpu())) << dtype;
  }
}

}  // namespace
