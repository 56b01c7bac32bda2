// Collectives on tensors that are not contiguous (Note [Strided tensors in collectives]):
// transposes, columns and expanded inputs take part with their logical values, and the
// result lands in the written tensor's own elements (its base's other elements keep
// theirs), on the cpu and on emulated cuda devices, over each all_reduce path. Written
// tensors whose elements share memory, and all_gather outputs of another shape, are refused
// with PyTorch's messages (ATen's assert_no_internal_overlap; ProcessGroupGloo::allgather's
// "invalid tensor size at index").
//
// Expected values are closed forms: rank r's base is (r + 1) * arange, so a sum over W
// ranks is W (W + 1) / 2 times rank 0's; torch.distributed (gloo, 2.x) gives the same for
// contiguous copies of these tensors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ember/ember.h"
#include "gloo_ranks_util.h"
#include "test_support.h"

namespace dist = ember::distributed;
using ember::Tensor;
using ember::detail::distributed::ProcessGroup;
using ember::testing::on_gloo_ranks;

namespace {

// Before any other cuda use in this process (static initialization runs before main).
const bool emulated = (ember::cuda::emulate(1, size_t{256} << 20), true);

/// A (rows, cols) float32 tensor of (rank + 1) * (0, 1, 2, ...) on `device`.
Tensor base_of(int64_t rows, int64_t cols, int rank, const std::string& device) {
  return ember::arange(0, rows * cols, 1, ember::kFloat32)
      .mul(ember::full({rows * cols}, rank + 1.0f))
      .view({rows, cols})
      .to(ember::Device(device));
}

float triangle(int world) { return static_cast<float>(world * (world + 1) / 2); }

using ember::testing::error_of;

struct Layout {
  int world;
  std::string device;
};

class StridedCollectives : public ::testing::TestWithParam<Layout> {
 protected:
  void SetUp() override {
    if (GetParam().device != "cpu" && ember::cuda::backend_name() != "emulated") {
      GTEST_SKIP() << "the gloo backend serves emulated cuda tensors; this process has " << ember::cuda::backend_name();
    }
  }
  std::string device() const { return GetParam().device; }
  int world() const { return GetParam().world; }
};

TEST_P(StridedCollectives, AllReduceOfAColumnOnEveryPathLandsInTheColumn) {
  // 5 rows ride in the record exchange; 50000 rows are all-gathered; 700000 run the ring.
  on_gloo_ranks(world(), [&](ProcessGroup& group) {
    for (int64_t rows : {5, 50000, 700000}) {
      Tensor base = base_of(rows, 2, group.rank(), device());
      Tensor column = base.select(1, 1);
      ASSERT_FALSE(column.is_contiguous());
      group.all_reduce(column, dist::ReduceOp::SUM, false)->wait();
      Tensor mine = base_of(rows, 2, group.rank(), "cpu"), first = base_of(rows, 2, 0, "cpu");
      EXPECT_TRUE(base.cpu().select(1, 1).equal(first.select(1, 1).mul(ember::full({rows}, triangle(world())))))
          << rows << " rows";
      EXPECT_TRUE(base.cpu().select(1, 0).equal(mine.select(1, 0))) << "the other column is untouched, " << rows;
    }
  });
}

TEST_P(StridedCollectives, AllReduceAndBroadcastOfATranspose) {
  on_gloo_ranks(world(), [&](ProcessGroup& group) {
    Tensor t = base_of(3, 4, group.rank(), device()).t();
    group.all_reduce(t, dist::ReduceOp::MAX, true)->wait();
    EXPECT_TRUE(t.cpu().equal(base_of(3, 4, world() - 1, "cpu").t()));
    Tensor b = base_of(3, 4, group.rank(), device()).t();
    group.broadcast(b, world() - 1, false)->wait();
    EXPECT_TRUE(b.cpu().equal(base_of(3, 4, world() - 1, "cpu").t()));
  });
}

TEST_P(StridedCollectives, AllGatherFromAnExpandedInputIntoTransposedOutputs) {
  on_gloo_ranks(world(), [&](ProcessGroup& group) {
    Tensor input = ember::full({1, 2}, group.rank() + 1.0f).to(ember::Device(device())).expand({3, 2});
    std::vector<Tensor> outputs;
    for (int r = 0; r < world(); ++r) outputs.push_back(ember::zeros({2, 3}).to(ember::Device(device())).t());
    group.all_gather(outputs, input, false)->wait();
    for (int r = 0; r < world(); ++r) EXPECT_TRUE(outputs[r].cpu().equal(ember::full({3, 2}, r + 1.0f))) << r;
  });
}

TEST_P(StridedCollectives, ReduceScatterFromTransposedInputsIntoAColumn) {
  on_gloo_ranks(world(), [&](ProcessGroup& group) {
    std::vector<Tensor> inputs;
    for (int r = 0; r < world(); ++r) {
      inputs.push_back(
          base_of(2, 3, group.rank(), device()).add(ember::full({2, 3}, 100.0f * r).to(ember::Device(device()))).t());
    }
    Tensor base = ember::zeros({3, 2, 2}).to(ember::Device(device()));
    Tensor output = base.select(2, 1);  // (3, 2), strides (4, 2)
    group.reduce_scatter(output, inputs, dist::ReduceOp::SUM, false)->wait();
    Tensor expected = base_of(2, 3, 0, "cpu")
                          .mul(ember::full({2, 3}, triangle(world())))
                          .add(ember::full({2, 3}, 100.0f * group.rank() * world()))
                          .t();
    EXPECT_TRUE(output.cpu().equal(expected));
    EXPECT_TRUE(base.cpu().select(2, 0).equal(ember::zeros({3, 2})));
  });
}

TEST_P(StridedCollectives, ExpandedTensorsACollectiveWritesAreRefusedAndTheGroupGoesOn) {
  const std::string overlap =
      "unsupported operation: more than one element of the written-to tensor refers to a single memory location. "
      "Please clone() the tensor before performing the operation.";
  on_gloo_ranks(world(), [&](ProcessGroup& group) {
    Tensor expanded = ember::ones({1}).to(ember::Device(device())).expand({3});
    EXPECT_EQ(error_of<ember::ValueError>([&] { group.all_reduce(expanded, dist::ReduceOp::SUM, false); }), overlap);
    EXPECT_EQ(error_of<ember::ValueError>([&] { group.broadcast(expanded, 0, false); }), overlap);
    std::vector<Tensor> outputs(static_cast<size_t>(world()), expanded);
    EXPECT_EQ(error_of<ember::ValueError>(
                  [&] { group.all_gather(outputs, ember::ones({3}).to(ember::Device(device())), false); }),
              overlap);
    std::vector<Tensor> inputs(static_cast<size_t>(world()), ember::ones({3}).to(ember::Device(device())));
    EXPECT_EQ(error_of<ember::ValueError>([&] { group.reduce_scatter(expanded, inputs, dist::ReduceOp::SUM, false); }),
              overlap);
    Tensor fine = ember::ones({3}).to(ember::Device(device()));
    group.all_reduce(fine, dist::ReduceOp::SUM, false)->wait();
    EXPECT_TRUE(fine.cpu().equal(ember::full({3}, static_cast<float>(world()))));
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, StridedCollectives,
                         ::testing::Values(Layout{2, "cpu"}, Layout{3, "cpu"}, Layout{2, "cuda:0"}),
                         [](const auto& info) {
                           return std::to_string(info.param.world) + "ranks_" +
                                  (info.param.device == "cpu" ? "cpu" : "cuda");
                         });

TEST(AllGatherOutputs, OfAnotherShapeOrDtypeAreRefusedOnEveryRank) {
  on_gloo_ranks(2, [](ProcessGroup& group) {
    Tensor input = ember::zeros({3, 2});
    std::vector<Tensor> flat{ember::zeros({6}), ember::zeros({6})};
    std::vector<Tensor> typed{ember::zeros({3, 2}), ember::zeros({3, 2}, ember::kFloat64)};
    // Each rank refuses its own arguments (and learns that the peer refused its own).
    EXPECT_EQ(error_of<ember::ValueError>([&] { group.all_gather(group.rank() == 0 ? flat : typed, input, false); }),
              group.rank() == 0 ? "all_gather: invalid tensor size at index 0 (expected (3, 2), got (6))"
                                : "all_gather: invalid tensor type at index 1 (expected float32, got float64)");
    std::vector<Tensor> inputs{ember::zeros({2, 3}), ember::zeros({2, 3})};
    EXPECT_EQ(error_of<ember::ValueError>([&] {
                group.reduce_scatter(ember::zeros({3, 2}), inputs, dist::ReduceOp::SUM, false);
              }),
              "reduce_scatter: invalid tensor size at index 0 (expected (3, 2), got (2, 3))");
    group.barrier(false)->wait();
  });
}

}  // namespace
