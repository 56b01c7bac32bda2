// Tensors: factories, views and strides, copies, printing, bad input.
#include "test_support.h"

using namespace ember;
using ember::testing::ensure_cuda;

namespace {

std::vector<float> vals(const Tensor& t) { return t.to_vector<float>(); }

TEST(Factories, DTypeInference) {
  EXPECT_EQ(tensor({1., 2.}).dtype(), kFloat32);
  EXPECT_EQ(tensor({{1, 2, 3}}).dtype(), kInt64);
  EXPECT_EQ(tensor({true, false}).dtype(), kBool);
  EXPECT_EQ(tensor({1, 2.5}).dtype(), kFloat32);
  EXPECT_EQ(tensor({{1, 2, 3}}).sizes(), (IntList{1, 3}));
  EXPECT_EQ(tensor(3.5).dim(), 0);
  EXPECT_EQ(tensor({1, 2}, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(full({2}, 7).dtype(), kInt64);
  EXPECT_EQ(full({2}, 0.5).dtype(), kFloat32);
  EXPECT_EQ(arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(0.0, 1.0, 0.25).to_vector<float>(), (std::vector<float>{0, 0.25, 0.5, 0.75}));
  EXPECT_EQ(arange(5, 0, -2).to_vector<int64_t>(), (std::vector<int64_t>{5, 3, 1}));
}

TEST(Factories, BadInput) {
  EXPECT_THROW_MSG(tensor({{1, 2}, {3}}), ValueError, "expected sequence of length 2 at dim 1 (got 1)");
  EXPECT_THROW_MSG(empty({2, -1}), ValueError, "negative dimension -1");
  EXPECT_THROW_MSG(arange(0, 5, 0), ValueError, "step must be nonzero");
  EXPECT_THROW_MSG(arange(0, 5, -1), ValueError, "inconsistent with step sign");
  EXPECT_THROW_MSG(empty({2}).normal_(0, -1), ValueError, "normal expects std >= 0.0");
  EXPECT_THROW_MSG(empty({2}, kInt64).uniform_(), TypeError, "floating point");
  EXPECT_THROW_MSG(tensor({1, 2}).item<int64_t>(), ValueError,
                   "a Tensor with 2 elements cannot be converted to Scalar");
}

TEST(Factories, SpecNewAndLikeExamples) {
  auto x_cpu = empty({2});
  auto x_cpu_long = empty({2}, kInt64);
  EXPECT_EQ(x_cpu.new_full({3, 2}, 0.3).str(),
            "tensor([[0.3000, 0.3000],\n        [0.3000, 0.3000],\n        [0.3000, 0.3000]])");
  EXPECT_EQ(x_cpu_long.new_tensor({{1, 2, 3}}).str(), "tensor([[1, 2, 3]])");
  EXPECT_EQ(x_cpu_long.new_tensor({{1, 2, 3}}).dtype(), kInt64);
  auto y = ones_like(empty({2, 3}));
  EXPECT_EQ(y.sizes(), (IntList{2, 3}));
  EXPECT_EQ(vals(y), std::vector<float>(6, 1.f));
  auto d = empty({2, 3}, kFloat64);
  EXPECT_EQ(zeros_like(d).dtype(), kFloat64);
  EXPECT_EQ(full_like(d, 2).to_vector<double>(), std::vector<double>(6, 2.0));
}

TEST(Factories, SpecNewFullOnCuda) {
  ensure_cuda();
  auto x_gpu = empty({2}, Device("cuda"));
  auto y = x_gpu.new_full({3, 2}, -5);
  EXPECT_EQ(y.device(), Device("cuda:0"));
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_EQ(y.str(), "tensor([[-5., -5.],\n        [-5., -5.],\n        [-5., -5.]], device='cuda:0')");
  auto z = zeros_like(empty({2, 3}, Device("cuda")));
  EXPECT_TRUE(z.is_cuda());
  EXPECT_EQ(vals(z), std::vector<float>(6, 0.f));
}

TEST(Views, StridesAndSharing) {
  auto x = arange(24).view({2, 3, 4});
  EXPECT_EQ(x.strides(), (IntList{12, 4, 1}));
  auto t = x.transpose(0, 2);
  EXPECT_EQ(t.sizes(), (IntList{4, 3, 2}));
  EXPECT_EQ(t.strides(), (IntList{1, 4, 12}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.contiguous().strides(), (IntList{6, 2, 1}));
  auto p = x.permute({1, 2, 0});
  EXPECT_EQ(p.sizes(), (IntList{3, 4, 2}));
  EXPECT_EQ(p.select(0, 1).select(0, 2).to_vector<int64_t>(), (std::vector<int64_t>{6, 18}));
  auto s = x.slice(2, 1, 4, 2);
  EXPECT_EQ(s.sizes(), (IntList{2, 3, 2}));
  EXPECT_EQ(s.storage_offset(), 1);
  EXPECT_EQ(x.narrow(1, 1, 2).select(0, 0).to_vector<int64_t>(), (std::vector<int64_t>{4, 5, 6, 7, 8, 9, 10, 11}));
  auto m = arange(6).view({2, 3});
  EXPECT_EQ(m.t().to_vector<int64_t>(), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  // Views share storage: writing through one is seen by the other.
  auto row = m.select(0, 1);
  row.fill_(9);
  EXPECT_EQ(m.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 9, 9, 9}));
  EXPECT_EQ(m.reshape({-1}).sizes(), (IntList{6}));
  // reshape of a non-viewable tensor copies; view refuses.
  EXPECT_EQ(m.t().reshape({6}).to_vector<int64_t>(), (std::vector<int64_t>{0, 9, 1, 9, 2, 9}));
  EXPECT_THROW_MSG(m.t().view({6}), ValueError, "view size is not compatible");
  EXPECT_EQ(m.unsqueeze(0).sizes(), (IntList{1, 2, 3}));
  EXPECT_EQ(m.expand({4, 2, 3}).strides(), (IntList{0, 3, 1}));
}

TEST(Views, BadInput) {
  auto x = arange(6).view({2, 3});
  EXPECT_THROW_MSG(x.view({4, 2}), ValueError, "shape '[4, 2]' is invalid for input of size 6");
  EXPECT_THROW_MSG(x.view({-1, -1}), ValueError, "only one dimension can be inferred");
  EXPECT_THROW_MSG(x.transpose(0, 2), IndexError,
                   "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  EXPECT_THROW_MSG(x.select(0, 2), IndexError, "index 2 out of range");
  EXPECT_THROW_MSG(x.narrow(1, 2, 2), ValueError, "start (2) + length (2) exceeds dimension size (3).");
  EXPECT_THROW_MSG(x.permute({0, 0}), ValueError, "duplicate dims");
  EXPECT_THROW_MSG(x.expand({3, 3}), ValueError, "must match the existing size (2)");
  EXPECT_THROW_MSG(tensor({1, 2, 3}).t().t().view({2, 2}), ValueError, "invalid for input of size 3");
}

TEST(Copies, DTypeAndDevice) {
  ensure_cuda();
  auto x = tensor({1.5, -2.5, 3.0});
  EXPECT_EQ(x.to(kInt32).to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(x.to(kBool).to_vector<bool>(), (std::vector<bool>{true, true, true}));
  auto c = x.cuda();
  EXPECT_EQ(c.device(), Device("cuda:0"));
  EXPECT_EQ(vals(c.cpu()), vals(x));
  auto c1 = c.to("cuda:1");
  EXPECT_EQ(c1.device(), Device("cuda:1"));
  EXPECT_EQ(vals(c1), vals(x));
  // copy_ into a non-contiguous cuda destination, with conversion and broadcasting.
  auto dst = zeros({3, 2}, TensorOptions(kFloat64).device("cuda:1"));
  dst.t().copy_(tensor({1, 2, 3}));
  EXPECT_EQ(dst.to_vector<double>(), (std::vector<double>{1, 1, 2, 2, 3, 3}));
  auto host = zeros({2, 3});
  host.copy_(dst.t());
  EXPECT_EQ(vals(host), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_THROW_MSG(host.copy_(zeros({4})), ValueError, "The size of tensor a (3) must match the size of tensor b (4)");
}

TEST(Copies, PinnedNonBlockingRoundTrip) {
  ensure_cuda();
  auto src = arange(1000, kFloat32).pin_memory();
  EXPECT_TRUE(src.is_pinned());
  EXPECT_FALSE(arange(3).is_pinned());
  auto dev = src.to(Device("cuda:0"), true);
  auto back = empty({1000}, TensorOptions(kFloat32).pinned_memory(true));
  back.copy_(dev, true);
  cuda::current_stream(0).synchronize();
  EXPECT_TRUE(equal(back, src));
  EXPECT_THROW_MSG(dev.pin_memory(), ValueError, "cannot pin");
}

TEST(Printing, Formats) {
  EXPECT_EQ(tensor({1., 2.}).str(), "tensor([1., 2.])");
  EXPECT_EQ(tensor({1., 2.}, kFloat64).str(), "tensor([1., 2.], dtype=torch.float64)");
  EXPECT_EQ(tensor(3).str(), "tensor(3)");
  EXPECT_EQ(arange(2000).sum().str(), "tensor(1999000)");
  std::ostringstream out;
  out << tensor({true, false});
  EXPECT_EQ(out.str(), "tensor([ True, False])");
}

}  // namespace
