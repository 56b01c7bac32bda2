// The driver's ForeachMul kernel (cuda_foreach.cu), run on the host by the host execution
// layer, against the cpu backend's: tensors of many sizes (empty ones, one longer than the
// grid, more than one launch's 48) scaled in place by a one-element tensor; and mixed
// precision's AmpNonFiniteCheckAndUnscale (the same walk, with an inf or NaN planted in one
// tensor or none) and AmpUpdateScale.
#include <gtest/gtest.h>

#include <cmath>

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

TEST(ForeachKernelsOnHost, AmpCheckAndUnscaleMatchesCpu) {
  manual_seed(29);
  std::vector<int64_t> sizes = {5, 0, 1, 70001, 0, 33};
  for (int i = 0; i < 55; ++i) sizes.push_back(i % 7 == 0 ? 0 : 3 * i + 2);
  const Tensor inv_scale = tensor({0.125f});
  for (DType d : {kFloat16, kBFloat16, kFloat32, kFloat64}) {
    for (int planted : {-1, 3, 58}) {  // no bad value; one in the big tensor; one in the second launch
      std::vector<Tensor> cpu_out, host_out;
      Tensor cpu_flag = zeros({1}), host_flag = zeros({1});
      KernelCall call{OpKind::AmpNonFiniteCheckAndUnscale, {arg(cpu_flag)}, {arg(inv_scale)}};
      for (size_t k = 0; k < sizes.size(); ++k) {
        Tensor t = random({sizes[k]}, d);
        if (static_cast<int>(k) == planted) t.narrow(0, t.numel() / 2, 1).fill_(planted == 3 ? INFINITY : NAN);
        cpu_out.push_back(t);
        host_out.push_back(t.clone());
        call.outputs.push_back(arg(cpu_out.back()));
      }
      detail::cpu::run(call);
      call.outputs[0] = arg(host_flag);
      for (size_t k = 0; k < host_out.size(); ++k) call.outputs[k + 1] = arg(host_out[k]);
      launch_on_host(call);
      host::check_cuda(cudaStreamSynchronize(nullptr));
      const std::string what = std::string(dtype_name(d)) + " planted " + std::to_string(planted);
      EXPECT_EQ(host_flag.item<float>(), planted < 0 ? 0.0f : 1.0f) << what;
      EXPECT_EQ(cpu_flag.item<float>(), host_flag.item<float>()) << what;
      for (size_t k = 0; k < host_out.size(); ++k) {
        if (static_cast<int>(k) == planted) continue;  // NaN never compares equal
        expect_same(host_out[k], cpu_out[k], what + " tensor " + std::to_string(k), 0, 0);
      }
    }
  }
}

TEST(ForeachKernelsOnHost, AmpUpdateScaleMatchesCpu) {
  for (float found : {0.0f, 1.0f, 2.0f}) {
    for (int32_t tracker : {0, 2, 3}) {
      Tensor cpu_scale = tensor({1024.0f}), host_scale = tensor({1024.0f});
      Tensor cpu_tracker = full({1}, tracker, TensorOptions(kInt32)), host_tracker = cpu_tracker.clone();
      const Tensor flag = tensor({found});
      KernelCall call{OpKind::AmpUpdateScale, {arg(cpu_scale), arg(cpu_tracker)}, {arg(flag)}};
      call.args = kargs::AmpUpdateScale{2.0, 0.5, 4};
      detail::cpu::run(call);
      call.outputs[0] = arg(host_scale);
      call.outputs[1] = arg(host_tracker);
      launch_on_host(call);
      host::check_cuda(cudaStreamSynchronize(nullptr));
      EXPECT_EQ(host_scale.item<float>(), cpu_scale.item<float>()) << found << " " << tracker;
      EXPECT_EQ(host_tracker.item<int32_t>(), cpu_tracker.item<int32_t>()) << found << " " << tracker;
    }
  }
  // The cpu's numbers are the rule's: a clean 4th step grows, an inf backs off.
  Tensor scale = tensor({1024.0f}), tracker = full({1}, 3, TensorOptions(kInt32));
  const Tensor clean = tensor({0.0f});
  KernelCall call{OpKind::AmpUpdateScale, {arg(scale), arg(tracker)}, {arg(clean)}};
  call.args = kargs::AmpUpdateScale{2.0, 0.5, 4};
  detail::cpu::run(call);
  EXPECT_EQ(scale.item<float>(), 2048.0f);
  EXPECT_EQ(tracker.item<int32_t>(), 0);
}

}  // namespace
}  // namespace ember::host_test
