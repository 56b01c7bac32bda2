// Shape arithmetic at the edges of int64: sizes, strides and offsets are combined with
// checked arithmetic, so each case gets PyTorch's answer or its error, and the ASan+UBSan
// build (which runs this file with halt_on_error) finds no signed overflow.
// Expected messages are PyTorch 2.x's (1.13 gives 0 elements for the slice case).
#include <cstdint>
#include <limits>

#include "test_support.h"

// Makes any UBSan report fatal in this test even without UBSAN_OPTIONS.
extern "C" const char* __ubsan_default_options() { return "halt_on_error=1:print_stacktrace=1"; }

namespace {

using namespace ember;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(ShapeOverflow, Narrow) {
  Tensor x = arange(4);
  EXPECT_THROW_MSG(x.narrow(0, 1, kMax), ValueError,
                   "start (1) + length (9223372036854775807) exceeds dimension size (4).");
  EXPECT_THROW_MSG(x.narrow(0, 1, -1), ValueError, "narrow(): length must be non-negative.");
  EXPECT_THROW_MSG(x.narrow(0, -4, -kMax - 1), ValueError, "narrow(): length must be non-negative.");
  EXPECT_EQ(x.narrow(0, -1, 1).item<int64_t>(), 3);
}

TEST(ShapeOverflow, SliceWithAHugeStep) {
  Tensor x = arange(4);
  Tensor s = x.slice(0, 0, 4, kMax);
  EXPECT_EQ(s.sizes(), (IntList{1}));
  EXPECT_EQ(s.item<int64_t>(), 0);
  EXPECT_EQ(x.slice(0, 1, kMax, kMax).sizes(), (IntList{1}));
  EXPECT_EQ(x.slice(0, -kMax, kMax, 3).to_vector<int64_t>(), (std::vector<int64_t>{0, 3}));
  // The step times a row stride of 4 passes int64; the one selected row needs no stride.
  Tensor y = arange(16).view({4, 4});
  Tensor row = y.slice(0, 1, 4, kMax);
  EXPECT_EQ(row.sizes(), (IntList{1, 4}));
  EXPECT_EQ(row.to_vector<int64_t>(), (std::vector<int64_t>{4, 5, 6, 7}));
}

TEST(ShapeOverflow, AsStridedWithAHugeStride) {
  Tensor x = arange(4);
  EXPECT_THROW_MSG(x.as_strided({2}, {kMax}, 0), ValueError,
                   "Storage size calculation overflowed with sizes=[2] and strides=[9223372036854775807]");
  EXPECT_THROW_MSG(x.as_strided({3}, {kMax / 2}, 0), ValueError, "Storage size calculation overflowed");
  EXPECT_THROW_MSG(x.as_strided({2}, {1}, kMax), ValueError, "Storage size calculation overflowed");
  EXPECT_EQ(x.as_strided({0, 5}, {kMax, kMax}, 0).numel(), 0);  // empty: nothing is addressed
  EXPECT_EQ(x.as_strided({1}, {kMax}, 3).item<int64_t>(), 3);
}

TEST(ShapeOverflow, EmptyPastInt64) {
  EXPECT_THROW_MSG(empty({int64_t{1} << 62, 4}), ValueError,
                   "Storage size calculation overflowed with sizes=[4611686018427387904, 4]");
  EXPECT_THROW_MSG(empty({int64_t{1} << 40, int64_t{1} << 40}), ValueError,
                   "Storage size calculation overflowed with sizes=[1099511627776, 1099511627776]");
  EXPECT_THROW_MSG(empty({int64_t{1} << 31, int64_t{1} << 31, 4}), ValueError, "Storage size calculation overflowed");
  // Fits in int64 elements but not in bytes.
  EXPECT_THROW_MSG(empty({int64_t{1} << 62}), ValueError, "Storage size calculation overflowed");
  // Zero elements, whatever the other sizes (strides wrap as PyTorch's do).
  Tensor z = empty({0, int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_EQ(z.numel(), 0);
  EXPECT_EQ(z.strides(), (IntList{0, int64_t{1} << 40, 1}));  // torch.empty(0, 2**40, 2**40).stride()
  EXPECT_EQ(empty({int64_t{1} << 40, int64_t{1} << 40, 0}).numel(), 0);
}

TEST(ShapeOverflow, ExpandViewAndReshape) {
  Tensor one = zeros({1, 1});
  EXPECT_THROW_MSG(one.expand({int64_t{1} << 40, int64_t{1} << 40}), ValueError,
                   "numel: integer multiplication overflow");
  EXPECT_THROW_MSG(zeros({4}).view({int64_t{1} << 62, -1}), ValueError,
                   "shape '[4611686018427387904, -1]' is invalid for input of size 4");
  EXPECT_THROW_MSG(zeros({4}).reshape({int64_t{1} << 40, int64_t{1} << 40}), ValueError,
                   "is invalid for input of size 4");
  EXPECT_EQ(zeros({0}).view({int64_t{1} << 40, int64_t{1} << 40, 0}).numel(), 0);
}

TEST(ShapeOverflow, ArangePastInt64) {
  EXPECT_THROW_MSG(arange(0, 1e20), ValueError, "invalid size, possible overflow?");
  EXPECT_THROW_MSG(arange(-1e19, 1e19, 1), ValueError, "invalid size, possible overflow?");
  EXPECT_THROW_MSG(arange(0.0, 4.6116860184273879e18), ValueError, "Storage size calculation overflowed");
  EXPECT_EQ(arange(0, 3).numel(), 3);
}

}  // namespace
