// Shared set-up of the suites of the scan, statistics, sorting, indexing and sampling ops:
// each runs on the cpu and on cuda:0 (an emulated device here, the driver on a GPU
// machine), with float64 gradcheck and value helpers.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "test_support.h"

namespace ember::testing {

class OpsOnDevice : public OnDevice {
 protected:
  void SetUp() override {
    OnDevice::SetUp();
    if (IsSkipped()) return;
    manual_seed(11);
  }
  /// `data` with `dtype` on the suite's device.
  Tensor T(const TensorData& data, DType dtype = kFloat64) const {
    return tensor(data, TensorOptions(dtype).device(dev_));
  }
  /// Standard normal float64 values that require grad.
  Tensor R(const IntList& shape) const {
    return randn(shape, TensorOptions(kFloat64).device(dev_)).requires_grad_(true);
  }
  /// Runs autograd::gradcheck; a failure names the op and the device.
  void gradcheck(const char* op, const autograd::GradcheckFn& fn, const std::vector<Tensor>& inputs) const {
    try {
      autograd::gradcheck(fn, inputs, 1e-6, 1e-5, 1e-3);
    } catch (const Error& e) {
      ADD_FAILURE() << op << " on " << dev_ << ": " << e.what();
    }
  }
};

/// Expects `t`'s values (as double, row-major) to equal `expected` to `tol` (relative and
/// absolute), NaN matching NaN.
inline void expect_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-12) {
  std::vector<double> got = t.to(kFloat64).to_vector<double>();
  ASSERT_EQ(got.size(), expected.size()) << t;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << ": " << got[i];
    } else if (std::isinf(expected[i])) {
      EXPECT_EQ(got[i], expected[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got[i], expected[i], tol * (1 + std::abs(expected[i]))) << "element " << i;
    }
  }
}

/// Expects integer values exactly.
inline void expect_ints(const Tensor& t, const std::vector<int64_t>& expected) {
  EXPECT_EQ(t.to(kInt64).to_vector<int64_t>(), expected) << t;
}

}  // namespace ember::testing
