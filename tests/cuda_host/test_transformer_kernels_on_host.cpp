// The driver backend's transformer kernels (cuda_index_add.cu, cuda_layer_norm.cu,
// cuda_gelu.cu), run on the host execution layer against the CPU backend with the helpers
// of compare_with_cpu.h. Their KernelCalls are built as src/ops/index_add.cpp,
// src/ops/nn/layer_norm.cpp and src/ops/nn/gelu.cpp build them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compare_with_cpu.h"
#include "kernels/transformer_kernels.h"

namespace ember::host_test {
namespace {

const std::vector<DType> kFloatTypes = {kFloat16, kBFloat16, kFloat32, kFloat64};

TEST(TransformerKernelsOnHost, GeluAndItsBackwardMatchCpu) {
  manual_seed(21);
  for (DType d : kFloatTypes) {
    for (const IntList& sizes : kShapes) {
      if (skipped_under_sanitizer(sizes, d)) continue;
      for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Unaligned}) {
        for (bool tanh : {false, true}) {
          const std::string what = std::string(layout_name(layout)) + (tanh ? " tanh" : " none");
          Tensor x = view(sizes, d, layout), g = view(sizes, d, layout);
          KernelCall forward{OpKind::Gelu, {TensorArg{}}, {arg(x)}, kargs::Gelu{tanh}};
          // The cpu's float bodies approximate erf and exp (within about 2e-7 of them,
          // cpu_gelu.cpp); the driver's call the device's erff and expf.
          compare(forward, empty(sizes, d), what, 1e-5, 2e-6);
          KernelCall backward{OpKind::GeluBackward, {TensorArg{}}, {arg(g), arg(x)}, kargs::Gelu{tanh}};
          compare(backward, empty(sizes, d), what + " backward", 1e-5, 2e-5);  // times |g| up to about 20
        }
      }
    }
  }
}

TEST(TransformerKernelsOnHost, LayerNormAndItsBackwardMatchCpu) {
  manual_seed(22);
  for (DType d : kFloatTypes) {
    // {rows, cols}: cols below, at and above a block's 256 threads; an empty batch.
    for (const IntList& sizes : std::vector<IntList>{{1, 1}, {3, 7}, {5, 256}, {4, 1000}, {0, 8}}) {
      for (int64_t affine : {int64_t{0}, detail::kLayerNormWeight, detail::kLayerNormWeight | detail::kLayerNormBias}) {
        const std::string what = "affine " + std::to_string(affine);
        Tensor x = random(sizes, d), w = random({sizes[1]}, d), b = random({sizes[1]}, d);
        KernelCall forward{OpKind::LayerNorm, {}, {arg(x)}, kargs::LayerNorm{affine, 1e-5}};
        if (affine & detail::kLayerNormWeight) forward.inputs.push_back(arg(w));
        if (affine & detail::kLayerNormBias) forward.inputs.push_back(arg(b));
        Tensor y = empty(sizes, d), mean = empty({sizes[0]}, d), rstd = empty({sizes[0]}, d);
        compare_outputs(forward, {y, mean, rstd}, what, 1e-4, 1e-4);
        // The backward from the cpu's statistics (compare_outputs left them in mean, rstd).
        Tensor g = random(sizes, d);
        KernelCall backward{OpKind::LayerNormBackward, {}, {arg(g), arg(x), arg(mean), arg(rstd)}};
        kargs::LayerNorm parts{detail::kLayerNormGradInput | detail::kLayerNormGradWeight | detail::kLayerNormGradBias};
        if (affine & detail::kLayerNormWeight) {
          backward.inputs.push_back(arg(w));
          parts.parts |= detail::kLayerNormWeight;
        }
        backward.args = parts;
        compare_outputs(backward, {empty(sizes, d), empty({sizes[1]}, d), empty({sizes[1]}, d)}, what + " backward",
                        1e-4, 1e-4);
      }
    }
  }
}

TEST(TransformerKernelsOnHost, IndexAddMatchesCpuExactly) {
  manual_seed(23);
  for (DType d : {kInt64, kFloat16, kBFloat16, kFloat32, kFloat64, kComplex64}) {
    for (int64_t dim : {0, 1}) {
      for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Strided}) {
        Tensor self = view({6, 5}, d, layout);
        IntList source_sizes{6, 5};
        source_sizes[static_cast<size_t>(dim)] = 40;
        Tensor source = view(source_sizes, d, layout);
        std::vector<int64_t> positions(40);
        for (size_t k = 0; k < positions.size(); ++k)
          positions[k] = static_cast<int64_t>((k * 7 + 3) % 11) % self.size(dim);
        Tensor index = tensor(TensorData(positions));
        Tensor cpu_self = self.clone(), host_self = self.clone();
        KernelCall call{
            OpKind::IndexAdd, {arg(cpu_self)}, {arg(cpu_self), arg(index), arg(source)}, kargs::IndexAdd{dim, 2}};
        detail::cpu::run(call);
        call.outputs[0] = call.inputs[0] = arg(host_self);
        launch_on_host(call);
        host::check_cuda(cudaStreamSynchronize(nullptr));
        // The same sums in the same order: equal bit for bit.
        EXPECT_TRUE(host_self.equal(cpu_self)) << layout_name(layout) << " dim " << dim << " " << d;
      }
    }
  }
}

TEST(TransformerKernelsOnHost, IndexAddOfManyRowsMatchesCpuExactly) {
  // 5000 destinations x 4000 indices: past the scan kernel's budget, the per-position kernel.
  manual_seed(24);
  for (DType d : {kFloat16, kFloat32}) {
    Tensor self = random({5000, 2}, d), source = random({4000, 2}, d);
    std::vector<int64_t> positions(4000);
    for (size_t k = 0; k < positions.size(); ++k) positions[k] = static_cast<int64_t>((k * 7919) % 5000);
    Tensor index = tensor(TensorData(positions));
    Tensor cpu_self = self.clone(), host_self = self.clone();
    KernelCall call{OpKind::IndexAdd, {arg(cpu_self)}, {arg(cpu_self), arg(index), arg(source)}, kargs::IndexAdd{0, 1}};
    detail::cpu::run(call);
    call.outputs[0] = call.inputs[0] = arg(host_self);
    launch_on_host(call);
    host::check_cuda(cudaStreamSynchronize(nullptr));
    EXPECT_TRUE(host_self.equal(cpu_self)) << d;
  }
}

TEST(TransformerKernelsOnHost, IndexAddOutOfRangeIsAnAsynchronousDeviceAssert) {
  Tensor self = zeros({4, 3}, kFloat32), source = ones({2, 3}, kFloat32);
  Tensor index = tensor({int64_t{1}, int64_t{4}});
  KernelCall call{OpKind::IndexAdd, {arg(self)}, {arg(self), arg(index), arg(source)}, kargs::IndexAdd{0, 1}};
  try {
    detail::cpu::run(call);
    ADD_FAILURE() << "the cpu accepted index 4";
  } catch (const IndexError& e) {
    EXPECT_STREQ(e.what(), "index out of range in self");
  }
  EXPECT_EQ(self.abs().sum().item<float>(), 0.0f);  // the cpu checked before writing
  host::launch_index_add(call, nullptr);            // the launch itself succeeds (asynchronous error)
  EXPECT_EQ(synchronize_and_reset(), kDeviceAssertMessage);
}

}  // namespace
}  // namespace ember::host_test
