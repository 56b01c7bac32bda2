// softmax / log_softmax over dense float rows longer than the kernels' vector lanes: a NaN
// in the vector part or in the tail makes the whole row NaN, large values stay stable, and
// a row that is -inf but for one element is one-hot; on the cpu and cuda:0 (emulated without a GPU).
// Expected values from PyTorch 1.13 (/usr/bin/python3):
//   x = arange(76.).reshape(4, 19) * 0.25 - 3; x[0, 3] = nan; x[1, 17] = nan
//   x[2] = 1000 + arange(19.) * 0.5; x[3] = -inf; x[3, 11] = 2
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ember/ember.h"
#include "test_support.h"

namespace ember {
namespace {

class SoftmaxRows : public ember::testing::OnDevice {
 protected:
  void SetUp() override {
    OnDevice::SetUp();
    if (IsSkipped()) return;
    std::vector<float> v(4 * 19);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.25f - 3;
    v[3] = NAN;
    v[19 + 17] = NAN;
    for (int j = 0; j < 19; ++j) v[2 * 19 + j] = 1000 + 0.5f * static_cast<float>(j), v[3 * 19 + j] = -INFINITY;
    v[3 * 19 + 11] = 2;
    x_ = tensor(v).reshape({4, 19}).to(dev_);
  }
  Tensor x_;
};

TEST_P(SoftmaxRows, NaNRowsLargeValuesAndInfinities) {
  for (bool log : {false, true}) {
    SCOPED_TRACE(log ? "log_softmax" : "softmax");
    std::vector<float> y = (log ? x_.log_softmax(1) : x_.softmax(1)).to(Device(kCPU)).to_vector<float>();
    for (int j = 0; j < 19; ++j) {
      EXPECT_TRUE(std::isnan(y[j])) << "row 0, element " << j;
      EXPECT_TRUE(std::isnan(y[19 + j])) << "row 1, element " << j;
      const float one_hot = j == 11 ? (log ? 0.0f : 1.0f) : (log ? -INFINITY : 0.0f);
      EXPECT_EQ(y[3 * 19 + j], one_hot) << "row 3, element " << j;
    }
    if (log) {
      EXPECT_NEAR(y[2 * 19 + 0], -9.932677268981934, 1e-5);
      EXPECT_NEAR(y[2 * 19 + 18], -0.9326772689819336, 1e-5);
    } else {
      EXPECT_NEAR(y[2 * 19 + 0], 4.856160740018822e-05, 1e-10);
      EXPECT_NEAR(y[2 * 19 + 18], 0.3934987783432007, 1e-6);
    }
  }
}

EMBER_ON_DEVICES(SoftmaxRows, "cpu", "cuda:0");

}  // namespace
}  // namespace ember
