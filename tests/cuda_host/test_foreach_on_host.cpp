// The driver's ForeachMul kernel (cuda_foreach.cu), run on the host by the host execution
// layer, against the cpu backend's: tensors of many sizes (empty ones, one longer than the
// grid, more than one launch's 48) scaled in place by a one-element tensor.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compare_with_cpu.h"

namespace ember::host_test {
namespace {

TEST(ForeachKernelsOnHost, ForeachMulMatchesCpu) {
  manual_seed(23);
  std::vector<int64_t> sizes = {5, 0, 1, 70001, 0, 33};
  for (int i = 0; i < 60; ++i) sizes.push_back(i % 5 == 0 ? 0 : 2 * i + 1);
  for (DType d : {kFloat16, kBFloat16, kFloat32, kFloat64}) {
    Tensor scale = random({1}, d);
    std::vector<Tensor> cpu_out, host_out;
    KernelCall call{OpKind::ForeachMul, {}, {arg(scale)}};
    for (int64_t n : sizes) {
      cpu_out.push_back(random({n}, d));
      host_out.push_back(cpu_out.back().clone());
      call.outputs.push_back(arg(cpu_out.back()));
    }
    detail::cpu::run(call);
    for (size_t k = 0; k < host_out.size(); ++k) call.outputs[k] = arg(host_out[k]);
    launch_on_host(call);
    host::check_cuda(cudaStreamSynchronize(nullptr));
    for (size_t k = 0; k < host_out.size(); ++k) {
      expect_same(host_out[k], cpu_out[k], std::string(dtype_name(d)) + " tensor " + std::to_string(k), 1e-6, 1e-6);
    }
  }
}

}  // namespace
}  // namespace ember::host_test
