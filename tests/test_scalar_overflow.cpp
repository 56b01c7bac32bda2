// Numbers that do not fit the dtype are refused with PyTorch's error instead of being
// wrapped, and the tensor keeps its values. Messages as PyTorch 1.13 prints them
// (torch.full / fill_ name the C++ type, torch.tensor the dtype).
#include <cmath>
#include <complex>
#include <limits>

#include "test_support.h"

namespace {

using namespace ember;
using ember::testing::error_of;

std::vector<Device> devices() {
  std::vector<Device> out{Device(kCPU)};
  ember::testing::ensure_cuda();
  if (cuda::is_available()) out.emplace_back(kCUDA, 0);
  return out;
}

TEST(ScalarOverflow, TensorFromNumbers) {
  EXPECT_THROW_MSG(tensor({300}, kInt8), ValueError, "value cannot be converted to type int8 without overflow");
  EXPECT_THROW_MSG(tensor({1e30}, kInt64), ValueError, "value cannot be converted to type int64 without overflow");
  EXPECT_THROW_MSG(tensor({std::nan("")}, kInt32), ValueError,
                   "value cannot be converted to type int32 without overflow");
  EXPECT_THROW_MSG(tensor({1, 70000}, kInt16), ValueError, "value cannot be converted to type int16 without overflow");
  EXPECT_THROW_MSG(tensor({std::complex<double>(1, 1)}, kFloat32), TypeError, "must be real number, not complex");
  // What fits, and what PyTorch lets through: uint8 wraps negatives, floats go to inf.
  EXPECT_EQ(tensor({-128, 127}, kInt8).to_vector<int8_t>(), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(tensor({-1}, kUInt8).item<int64_t>(), 255);
  EXPECT_TRUE(std::isinf(tensor({1e39}, kFloat32).item<float>()));
  EXPECT_TRUE(std::isinf(tensor({1e30}, kFloat16).item<float>()));
}

TEST(ScalarOverflow, FullAndFill) {
  for (Device device : devices()) {
    EXPECT_THROW_MSG(full({1}, 1e30, TensorOptions(kInt64).device(device)), ValueError,
                     "value cannot be converted to type int64_t without overflow");
    EXPECT_THROW_MSG(full({1}, std::nan(""), TensorOptions(kInt64).device(device)), ValueError,
                     "value cannot be converted to type int64_t without overflow");
    EXPECT_THROW_MSG(full({1}, 2147483648LL, TensorOptions(kInt32).device(device)), ValueError,
                     "value cannot be converted to type int without overflow");
    EXPECT_THROW_MSG(full({1}, 127.9, TensorOptions(kInt8).device(device)), ValueError,
                     "value cannot be converted to type int8_t without overflow");
    EXPECT_THROW_MSG(full({1}, 1e5, TensorOptions(kFloat16).device(device)), ValueError,
                     "value cannot be converted to type at::Half without overflow");
    EXPECT_THROW_MSG(full({1}, 1e39, TensorOptions(kBFloat16).device(device)), ValueError,
                     "value cannot be converted to type at::BFloat16 without overflow");
    EXPECT_THROW_MSG(full({1}, 1e300, TensorOptions(kFloat32).device(device)), ValueError,
                     "value cannot be converted to type float without overflow");
    EXPECT_THROW_MSG(full({1}, 1e300, TensorOptions(kComplex64).device(device)), ValueError,
                     "value cannot be converted to type c10::complex<float> without overflow");

    Tensor t = tensor({5, 6}, TensorOptions(kInt8).device(device));
    EXPECT_THROW_MSG(t.fill_(1000), ValueError, "value cannot be converted to type int8_t without overflow");
    EXPECT_EQ(t.to_vector<int8_t>(), (std::vector<int8_t>{5, 6}));  // unchanged
    Tensor f = ones({2}, TensorOptions(kFloat32).device(device));
    EXPECT_THROW_MSG(f.fill_(std::complex<double>(1, 1)), ValueError,
                     "value cannot be converted to type float without overflow");
    EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{1, 1}));

    // Accepted, as in PyTorch.
    EXPECT_EQ(full({1}, -1, TensorOptions(kUInt8).device(device)).item<int64_t>(), 255);
    EXPECT_EQ(full({1}, -128, TensorOptions(kInt8).device(device)).item<int64_t>(), -128);
    EXPECT_EQ(full({1}, 2, TensorOptions(kBool).device(device)).item<bool>(), true);
    EXPECT_TRUE(std::isinf(full({1}, INFINITY, TensorOptions(kFloat16).device(device)).item<float>()));
    EXPECT_TRUE(std::isnan(full({1}, NAN, TensorOptions(kFloat32).device(device)).item<float>()));
    EXPECT_EQ(f.fill_(std::complex<double>(2, 0)).to_vector<float>(), (std::vector<float>{2, 2}));
  }
}

TEST(ScalarOverflow, Item) {
  Tensor big = tensor({1e20});
  EXPECT_THROW_MSG((void)big.item<int>(), ValueError, "value cannot be converted to type int without overflow");
  EXPECT_THROW_MSG((void)tensor({300}).item<int8_t>(), ValueError,
                   "value cannot be converted to type int8_t without overflow");
  EXPECT_THROW_MSG((void)tensor({std::complex<double>(1, 2)}).item<double>(), ValueError,
                   "value cannot be converted to type double without overflow");
  EXPECT_EQ(big.item<double>(), static_cast<double>(1e20f));
  EXPECT_EQ(tensor({-5}).item<int8_t>(), -5);
  EXPECT_EQ(tensor({3.75}).item<int>(), 3);
  EXPECT_EQ(tensor({std::complex<double>(1, 2)}).item<std::complex<float>>(), std::complex<float>(1, 2));
}

}  // namespace
