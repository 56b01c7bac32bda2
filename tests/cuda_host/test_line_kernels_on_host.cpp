// The driver's line kernels (cuda_cumsum.cu, cuda_sort.cu, cuda_scatter.cu), run on the host
// execution layer against the CPU backend with the helpers of compare_with_cpu.h. Their
// bodies are shared (kernels/line_bodies.h, Note [Line kernels]), so results must match
// exactly: cumsum's serial sums, sort's stable order (ties and NaNs included), scatter_add's
// in-order sums and multinomial's Philox draws. KernelCalls are built as src/ops/cumsum.cpp,
// sort.cpp, scatter.cpp and multinomial.cpp build them.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "compare_with_cpu.h"

namespace ember::host_test {
namespace {

struct LineCase {
  IntList sizes;
  int64_t dim;
};
// Short and long lines (longer than a block for the rank sort), many lines, size-1 and empty dims.
const std::vector<LineCase> kLineCases = {{{1}, 0},       {{7}, 0},         {{33, 17}, 0},
                                          {{33, 17}, 1},  {{2, 3, 300}, 2}, {{5, 700}, 1},
                                          {{4, 1, 3}, 1}, {{3, 0, 2}, 2},   {{3, 0, 2}, 1}};

/// Values with many ties (a few distinct values) and, for floats, NaNs.
Tensor tied(const IntList& sizes, DType d, Layout layout) {
  Tensor t = view(sizes, d, layout);
  if (t.numel() == 0) return t;
  t.copy_((random(sizes, kFloat64) * 0.5).to(kInt64).to(d));
  if (is_floating_point(d)) t.copy_(t.masked_fill(random(sizes, kFloat64).gt(7.0), NAN));
  return t;
}

TEST(LineKernelsOnHost, CumsumMatchesCpu) {
  manual_seed(21);
  for (DType d : {kBool, kUInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    for (const LineCase& c : kLineCases) {
      for (Layout layout : {Layout::Contiguous, Layout::Transposed}) {
        if (c.sizes.size() < 2 && layout != Layout::Contiguous) continue;
        Tensor in = view(c.sizes, d, layout);
        KernelCall call{OpKind::Cumsum, {TensorArg{}}, {arg(in)}};
        call.args = kargs::Dim{c.dim};
        compare(call, empty(c.sizes, is_integral(d, true) ? kInt64 : d), layout_name(layout), 0, 0);
      }
    }
  }
}

TEST(LineKernelsOnHost, SortAndTopkMatchCpu) {
  manual_seed(22);
  for (DType d : {kBool, kInt8, kInt32, kInt64, kFloat16, kFloat32, kFloat64}) {
    for (const LineCase& c : kLineCases) {
      for (Layout layout : {Layout::Contiguous, Layout::Transposed}) {
        if (c.sizes.size() < 2 && layout != Layout::Contiguous) continue;
        Tensor in = tied(c.sizes, d, layout);
        const int64_t n = c.sizes[static_cast<size_t>(c.dim)];
        for (int64_t k : {n, n / 3}) {
          for (bool descending : {false, true}) {
            IntList sizes = c.sizes;
            sizes[static_cast<size_t>(c.dim)] = k;
            KernelCall call{OpKind::Sort, {TensorArg{}, TensorArg{}}, {arg(in)}};
            call.args = kargs::Sort{c.dim, descending};
            compare_outputs(call, {empty(sizes, d), empty(sizes, kInt64)},
                            std::string(layout_name(layout)) + " k " + std::to_string(k), 0, 0);
          }
        }
      }
    }
  }
}

// Triangle: the driver's thread per row (its row within the matrix from the row-major line
// number) against the cpu's walk over matrices, any batch dims and layouts, diagonals
// inside and past the matrix, both triangles.
TEST(LineKernelsOnHost, TriangleMatchesCpu) {
  manual_seed(24);
  const std::vector<IntList> shapes = {{1, 1}, {3, 5}, {5, 3}, {2, 3, 4}, {2, 1, 3, 7}, {0, 3}, {4, 0}, {3, 0, 2}};
  for (DType d : {kBool, kUInt8, kInt64, kFloat16, kFloat32, kFloat64, kComplex64}) {
    for (const IntList& sizes : shapes) {
      for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Strided}) {
        Tensor in = view(sizes, d, layout);
        for (int64_t diagonal :
             {int64_t{-100}, int64_t{-2}, int64_t{0}, int64_t{1}, int64_t{4}, std::numeric_limits<int64_t>::max()}) {
          for (bool upper : {true, false}) {
            KernelCall call{OpKind::Triangle, {TensorArg{}}, {arg(in)}};
            call.args = kargs::Triangle{diagonal, upper};
            compare(call, empty(sizes, d),
                    std::string(layout_name(layout)) + " diagonal " + std::to_string(diagonal) +
                        (upper ? " triu" : " tril"),
                    0, 0);
          }
        }
      }
    }
  }
}

TEST(LineKernelsOnHost, GatherAndScatterAddMatchCpu) {
  manual_seed(23);
  for (DType d : {kBool, kUInt8, kInt32, kInt64, kFloat16, kFloat32, kFloat64}) {
    for (const LineCase& c : kLineCases) {
      const auto dim = static_cast<size_t>(c.dim);
      IntList index_sizes = c.sizes;
      index_sizes[dim] = index_sizes[dim] * 2 + 1;  // more indices than the dim's size: repeats
      const int64_t size = c.sizes[dim];
      if (size == 0) continue;
      Tensor index = (rand(index_sizes, kFloat64) * static_cast<double>(size)).to(kInt64).clamp(0, size - 1);
      Tensor self = view(c.sizes, d, Layout::Contiguous);
      KernelCall gather{OpKind::Gather, {TensorArg{}}, {arg(self), arg(index)}};
      gather.args = kargs::Dim{c.dim};
      compare(gather, empty(index_sizes, d), "gather", 0, 0);
      // ScatterAdd reads and writes its output: both executors start from the same values.
      Tensor src = view(index_sizes, d, Layout::Contiguous);
      Tensor start = view(c.sizes, d, Layout::Transposed);
      Tensor expected = start.clone(), actual = start.clone();
      KernelCall scatter{OpKind::ScatterAdd, {arg(expected)}, {arg(index), arg(src)}};
      scatter.args = kargs::Dim{c.dim};
      detail::cpu::run(scatter);
      scatter.outputs[0] = arg(actual);
      launch_on_host(scatter);
      host::check_cuda(cudaStreamSynchronize(nullptr));
      expect_same(actual, expected, "scatter_add " + describe(scatter), 0, 0);
    }
  }
}

TEST(LineKernelsOnHost, IndexOutOfRangeIsAnAsynchronousDeviceAssert) {
  Tensor self = randn({5}, kFloat32), index = tensor({int64_t{1}, int64_t{7}});
  Tensor out = empty({2}, kFloat32);
  KernelCall gather{OpKind::Gather, {arg(out)}, {arg(self), arg(index)}};
  gather.args = kargs::Dim{0};
  host::launch_scatter(gather, nullptr);  // the launch itself succeeds (asynchronous error)
  EXPECT_EQ(synchronize_and_reset(), kDeviceAssertMessage);
  KernelCall scatter{OpKind::ScatterAdd, {arg(self)}, {arg(index), arg(out)}};
  scatter.args = kargs::Dim{0};
  host::launch_scatter(scatter, nullptr);
  EXPECT_EQ(synchronize_and_reset(), kDeviceAssertMessage);
}

TEST(LineKernelsOnHost, MultinomialDrawsMatchCpu) {
  manual_seed(24);
  for (bool replacement : {true, false}) {
    for (IntList shape : {IntList{1, 5}, IntList{7, 40}, IntList{300, 3}}) {
      Tensor weights = rand(shape, kFloat64);
      weights.select(1, 0).zero_();  // a zero weight in every row
      const int64_t k = replacement ? 50 : shape[1] - 1;
      Tensor expected = empty({shape[0], k}, kInt64), actual = empty({shape[0], k}, kInt64);
      Tensor work_cpu = weights.clone(), work_host = weights.clone();
      KernelCall call{OpKind::Multinomial, {arg(expected), arg(work_cpu)}, {}};
      call.args = kargs::Multinomial{replacement};
      call.seed = 99;
      call.offset = 16;
      detail::cpu::run(call);
      call.outputs[0] = arg(actual);
      call.outputs[1] = arg(work_host);
      launch_on_host(call);
      host::check_cuda(cudaStreamSynchronize(nullptr));
      expect_same(actual, expected, "multinomial " + describe(call));
      expect_same(work_host, work_cpu, "multinomial's weights " + describe(call));
    }
  }
}

}  // namespace
}  // namespace ember::host_test
