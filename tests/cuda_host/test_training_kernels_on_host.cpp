// The driver backend's training-op kernels (cuda_select.cu, cuda_softmax.cu, cuda_pool.cu,
// cuda_im2col.cu's Col2Im, cuda_loss.cu, cuda_optimizer_step.cu), run on the host
// execution layer against the CPU backend, with the helpers of compare_with_cpu.h: random
// data, empty and size-1 operands, non-contiguous and broadcast layouts, every dtype each
// kernel is compiled for. Their KernelCalls are built as src/ops/select.cpp,
// src/ops/softmax.cpp, src/ops/nn/pooling.cpp, src/ops/nn/convolution.cpp, src/ops/nn/loss.cpp,
// src/ops/nn/batch_norm.cpp and src/optim/fused_step.cpp build them.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "compare_with_cpu.h"
#include "kernels/conv_geometry.h"
#include "kernels/loss_kernels.h"
#include "kernels/optimizer_step.h"
#include "kernels/pool_geometry.h"

namespace ember::host_test {
namespace {

const std::vector<DType> kFloatTypes = {kFloat16, kBFloat16, kFloat32, kFloat64};

/// Random floats with a few NaNs (every 13th element) when `nans`.
Tensor with_nans(Tensor t, bool nans) {
  if (!nans || t.numel() == 0) return t;
  Tensor flat = t.contiguous().view({-1});
  for (int64_t i = 5; i < flat.numel(); i += 13) flat.narrow(0, i, 1).fill_(NAN);
  if (!t.is_contiguous()) t.copy_(flat.view(t.sizes()));  // keeps t's layout
  return t;
}

TEST(TrainingKernelsOnHost, WhereAndClampMatchCpu) {
  manual_seed(11);
  std::vector<IntList> shapes = kShapes;
  for (const IntList& shape : random_shapes(6, 11)) shapes.push_back(shape);
  for (DType d : kAllTypes) {
    for (const IntList& sizes : shapes) {
      if (skipped_under_sanitizer(sizes, d)) continue;
      for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Unaligned, Layout::Broadcast}) {
        const std::string what = layout_name(layout);
        Tensor cond = view(sizes, kBool, layout == Layout::Broadcast ? Layout::Broadcast : Layout::Transposed);
        Tensor a = view(sizes, d, layout), b = view(sizes, d, Layout::Contiguous);
        compare(KernelCall{OpKind::Where, {TensorArg{}}, {arg(cond), arg(a), arg(b)}}, empty(sizes, d),
                what + " where");
        if (is_complex(d)) continue;  // clamp is real only
        Tensor lo = view(sizes, d, Layout::Strided), hi = view(sizes, d, Layout::Broadcast);
        for (int64_t bounds : {1, 2, 3}) {  // bit 1: min given, bit 2: max given
          KernelCall clamp{OpKind::Clamp,
                           {TensorArg{}},
                           {arg(a), arg(lo), arg(hi)},
                           kargs::Clamp{(bounds & 1) != 0, (bounds & 2) != 0}};
          compare(clamp, empty(sizes, d), what + " clamp " + std::to_string(bounds));
          KernelCall scalar{OpKind::ClampScalar,
                            {TensorArg{}},
                            {arg(a)},
                            kargs::ClampScalar{-2, 3, (bounds & 1) != 0, (bounds & 2) != 0}};
          compare(scalar, empty(sizes, d), what + " clamp scalar " + std::to_string(bounds));
        }
      }
    }
  }
}

struct DimCase {
  IntList sizes;
  int64_t dim;
};
// {5, 1100} along 1: rows longer than a warp's 32 lanes; along 0: many short rows. Then
// random shapes along a random dim.
const std::vector<DimCase> kDimCases = [] {
  std::vector<DimCase> cases = {{{}, 0},        {{1}, 0},         {{7}, 0},         {{33, 17}, 0},
                                {{33, 17}, 1},  {{2, 3, 300}, 2}, {{2, 3, 300}, 1}, {{5, 1100}, 1},
                                {{5, 1100}, 0}, {{4, 1, 3}, 1},   {{3, 0, 2}, 2}};
  int64_t dim = 0;
  for (const IntList& shape : random_shapes(6, 12))
    cases.push_back({shape, dim++ % static_cast<int64_t>(shape.size())});
  return cases;
}();

TEST(TrainingKernelsOnHost, SoftmaxAndLogSoftmaxMatchCpu) {
  manual_seed(12);
  for (DType d : kFloatTypes) {
    if (kSanitized && d != kFloat32 && d != kFloat16) continue;  // fibers: fewer cases under ASan
    for (const DimCase& c : kDimCases) {
      if (skipped_under_sanitizer(c.sizes, d)) continue;
      for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Strided}) {
        if (c.sizes.size() < 2 && layout != Layout::Contiguous) continue;
        Tensor in = view(c.sizes, d, layout);
        for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax}) {
          KernelCall call{op, {TensorArg{}}, {arg(in)}};
          call.args = kargs::Dim{c.dim};
          // The output in the input's layout too (the kernel takes any output strides).
          Tensor out = layout == Layout::Transposed ? view(c.sizes, d, layout) : empty(c.sizes, d);
          compare(call, out, std::string(layout_name(layout)) + " dim " + std::to_string(c.dim), 1e-5, 1e-5);
        }
      }
    }
  }
}

// LogSumExp: the driver's warp per line against the cpu's lanes (float32 rows: fast_exp)
// and blocks of lines; NaN and infinite maxima included.
TEST(TrainingKernelsOnHost, LogSumExpMatchesCpu) {
  manual_seed(14);
  for (DType d : kFloatTypes) {
    if (kSanitized && d != kFloat32 && d != kFloat16) continue;  // fibers: fewer cases under ASan
    for (const DimCase& c : kDimCases) {
      if (skipped_under_sanitizer(c.sizes, d)) continue;
      for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Strided}) {
        if (c.sizes.size() < 2 && layout != Layout::Contiguous) continue;
        Tensor in = view(c.sizes, d, layout);
        if (in.numel() > 0) {  // about 1% each of NaN, +inf and -inf, in the input's layout
          Tensor u = random(c.sizes, kFloat64);
          in.copy_(
              in.masked_fill(u.gt(12.5), -INFINITY).masked_fill(u.gt(14.0), NAN).masked_fill(u.lt(-14.0), INFINITY));
        }
        IntList out_sizes = c.sizes;
        if (!out_sizes.empty()) out_sizes[static_cast<size_t>(c.dim)] = 1;
        KernelCall call{OpKind::LogSumExp, {TensorArg{}}, {arg(in)}};
        call.args = kargs::Dim{c.dim};
        compare(call, empty(out_sizes, d), std::string(layout_name(layout)) + " dim " + std::to_string(c.dim), 1e-5,
                1e-5);
      }
    }
  }
}

TEST(TrainingKernelsOnHost, ArgMaxAndArgMinMatchCpu) {
  manual_seed(13);
  // Integers in a small range (ties: the first index wins) and floats with NaNs (NaN wins).
  for (DType d : {kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64}) {
    for (const DimCase& c : kDimCases) {
      int64_t n = 1;
      for (int64_t v : c.sizes) n *= v;
      if (n == 0) continue;  // the op launches nothing (or rejects it)
      for (Layout layout : {Layout::Contiguous, Layout::Transposed}) {
        if (c.sizes.size() < 2 && layout != Layout::Contiguous) continue;
        Tensor in = view(c.sizes, d, layout);
        if (is_integral(d, false)) in.copy_((random(c.sizes, kFloat64).abs() * 0.25).to(d));  // mostly 0 to 3
        in = with_nans(in, is_floating_point(d) && c.sizes.size() >= 2);
        for (OpKind op : {OpKind::ArgMax, OpKind::ArgMin}) {
          for (bool whole : {false, true}) {  // along c.dim, or over the whole tensor (dim -1)
            if (whole && in.numel() == 0) continue;
            KernelCall call{op, {TensorArg{}}, {arg(in)}};
            call.args = kargs::Dim{whole ? -1 : c.dim};
            IntList kept = c.sizes;
            if (!kept.empty()) kept[c.dim] = 1;
            compare(call, empty(whole ? IntList{} : kept, kInt64),
                    std::string(layout_name(layout)) + (whole ? " whole" : " dim " + std::to_string(c.dim)));
          }
        }
      }
    }
  }
}

// pooling.cpp's output size.
int64_t pool_output(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  const int64_t numerator = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = numerator / stride + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

TEST(TrainingKernelsOnHost, MaxPoolAndAvgPoolMatchCpu) {
  manual_seed(14);
  struct Case {
    IntList input;
    int64_t kernel, stride, pad, dilation;
    bool ceil_mode;
  };
  const std::vector<Case> cases = {{{1, 1, 1, 1}, 1, 1, 0, 1, false}, {{2, 3, 8, 8}, 2, 2, 0, 1, false},
                                   {{1, 2, 7, 9}, 3, 2, 1, 1, true},  {{2, 2, 9, 7}, 3, 1, 1, 2, false},
                                   {{0, 3, 4, 4}, 2, 2, 0, 1, false}, {{3, 4, 33, 17}, 3, 2, 1, 1, true},
                                   {{1, 1, 5, 5}, 2, 3, 1, 1, true}};
  for (DType d : kFloatTypes) {
    for (const Case& c : cases) {
      for (bool channels_last : {false, true}) {
        Tensor in = channels_last ? random({c.input[0], c.input[2], c.input[3], c.input[1]}, d).permute({0, 3, 1, 2})
                                  : random(c.input, d);
        in = with_nans(in, d == kFloat32);
        detail::PoolGeometry g;
        g.kernel_h = g.kernel_w = c.kernel;
        g.stride_h = g.stride_w = c.stride;
        g.pad_h = g.pad_w = c.pad;
        g.dilation_h = g.dilation_w = c.dilation;
        g.out_h = pool_output(c.input[2], c.kernel, c.pad, c.stride, c.dilation, c.ceil_mode);
        g.out_w = pool_output(c.input[3], c.kernel, c.pad, c.stride, c.dilation, c.ceil_mode);
        const IntList out{c.input[0], c.input[1], g.out_h, g.out_w};
        const std::string what = std::string(channels_last ? "channels last" : "") + " kernel " +
                                 std::to_string(c.kernel) + " ceil " + std::to_string(c.ceil_mode);
        KernelCall max{OpKind::MaxPool2d, {TensorArg{}, TensorArg{}}, {arg(in)}};
        max.payload = std::make_shared<detail::PoolGeometry>(g);
        compare_outputs(max, {empty(out, d), empty(out, kInt64)}, what);
        if (c.dilation != 1) continue;                   // avg_pool2d has no dilation
        for (int variant = 0; variant < 3; ++variant) {  // count_include_pad, not, divisor_override
          detail::PoolGeometry ga = g;
          ga.count_include_pad = variant == 0;
          ga.divisor_override = variant == 2 ? 3 : 0;
          KernelCall avg{OpKind::AvgPool2d, {TensorArg{}}, {arg(in)}};
          avg.payload = std::make_shared<detail::PoolGeometry>(ga);
          compare(avg, empty(out, d), what + " avg variant " + std::to_string(variant));
        }
      }
    }
  }
}

// The driver's Col2Im and MaxPool2dBackward gather per input element what the CPU's
// kernels scatter per plane; their KernelCalls are built as src/ops/nn/convolution.cpp and
// src/ops/nn/pooling.cpp build them (indices from the CPU's max_pool2d).
TEST(TrainingKernelsOnHost, Col2ImAndMaxPoolBackwardMatchCpu) {
  manual_seed(8);
  struct Case {
    IntList input;
    int64_t kh, kw, stride, pad, dilation;
  };
  const std::vector<Case> cases = {{{2, 3, 8, 9}, 2, 2, 2, 0, 1},
                                   {{1, 2, 7, 9}, 3, 3, 1, 1, 1},
                                   {{2, 1, 9, 8}, 3, 2, 2, 1, 2},
                                   {{3, 2, 5, 6}, 3, 3, 2, 1, 1}};
  for (DType d : {kFloat32, kFloat64}) {
    for (const Case& c : cases) {
      const std::string what = "input " + std::to_string(c.input[2]) + "x" + std::to_string(c.input[3]);
      auto [pooled, indices] =
          nn::functional::max_pool2d_with_indices(random(c.input, d), {c.kh, c.kw}, {c.stride}, {c.pad}, {c.dilation});
      const int64_t out_h = pooled.size(2), out_w = pooled.size(3);
      // A transposed (non-contiguous) output gradient.
      Tensor grad = random({pooled.size(0), pooled.size(1), out_w, out_h}, d).transpose(2, 3);
      KernelCall pool{OpKind::MaxPool2dBackward, {TensorArg{}}, {arg(grad), arg(indices)}};
      pool.payload = std::make_shared<detail::PoolGeometry>(
          detail::PoolGeometry{c.kh, c.kw, c.stride, c.stride, c.pad, c.pad, c.dilation, c.dilation, out_h, out_w});
      compare(pool, empty(c.input, d), what + " max_pool2d backward");

      const detail::ConvGeometry g{c.kh,
                                   c.kw,
                                   c.stride,
                                   c.stride,
                                   c.pad,
                                   c.pad,
                                   c.dilation,
                                   c.dilation,
                                   (c.input[2] + 2 * c.pad - c.dilation * (c.kh - 1) - 1) / c.stride + 1,
                                   (c.input[3] + 2 * c.pad - c.dilation * (c.kw - 1) - 1) / c.stride + 1};
      const int64_t rows = c.input[1] * c.kh * c.kw, positions = g.out_h * g.out_w;
      for (bool channel_major : {false, true}) {
        Tensor columns = channel_major ? random({rows, c.input[0], positions}, d).transpose(0, 1)
                                       : random({c.input[0], rows, positions}, d);
        KernelCall fold{OpKind::Col2Im, {TensorArg{}}, {arg(columns)}};
        fold.payload = std::make_shared<detail::ConvGeometry>(g);
        compare(fold, empty(c.input, d), what + (channel_major ? " col2im channel-major" : " col2im"));
      }
    }
  }
}

TEST(TrainingKernelsOnHost, NllLossMatchesCpu) {
  manual_seed(15);
  struct Case {
    int64_t batch, classes, spatial;
  };
  // {3, 5, 2000}: the reduced kernel's one block folds 6000 terms, 24 per thread.
  const std::vector<Case> cases = {{1, 1, 1}, {4, 5, 1}, {3, 7, 9}, {70, 10, 1}, {2, 3, 0}, {3, 5, 2000}};
  for (DType d : kFloatTypes) {
    for (const Case& c : cases) {
      for (bool transposed : {false, true}) {  // classes innermost in memory (as x.permute(0, 2, 1))
        Tensor in = transposed ? random({c.batch, c.spatial, c.classes}, d).transpose(1, 2)
                               : random({c.batch, c.classes, c.spatial}, d);
        Tensor target = (rand({c.spatial, c.batch}, kFloat64) * static_cast<double>(c.classes)).to(kInt64).t();
        // Ignored elements: element 1 as ignore_index -100, or class 0 as ignore_index (every
        // element of the one-class case: its mean is NaN, 0 / 0, as PyTorch's).
        for (int64_t ignore : {int64_t{-100}, int64_t{0}}) {
          Tensor t = target.clone();
          if (t.numel() > 2) t.view({-1}).narrow(0, 1, 1).fill_(ignore);
          for (int64_t reduction : {0, 1, 2}) {
            if (reduction != 0 && t.numel() == 0) continue;  // nll_loss fills those itself
            KernelCall call{
                OpKind::NllLoss, {TensorArg{}, TensorArg{}}, {arg(in), arg(t)}, kargs::NllLoss{ignore, reduction}};
            const IntList shape = reduction == 0 ? IntList{c.batch, c.spatial} : IntList{};
            compare_outputs(call, {empty(shape, d), empty(shape, d)},
                            "nll reduction " + std::to_string(reduction) + " ignore " + std::to_string(ignore), 1e-5,
                            1e-5);
          }
        }
      }
    }
  }
}

TEST(TrainingKernelsOnHost, NllLossTargetOutOfBoundsIsAnAsynchronousDeviceAssert) {
  Tensor in = randn({3, 5, 1}, kFloat32);
  Tensor target = tensor({int64_t{0}, int64_t{5}, int64_t{2}}).view({3, 1});
  for (int64_t reduction : {0, 2}) {
    const IntList shape = reduction == 0 ? IntList{3, 1} : IntList{};
    Tensor loss = empty(shape, kFloat32), counted = empty(shape, kFloat32);
    KernelCall call{
        OpKind::NllLoss, {arg(loss), arg(counted)}, {arg(in), arg(target)}, kargs::NllLoss{-100, reduction}};
    try {
      detail::cpu::run(call);
      ADD_FAILURE() << "the cpu accepted target 5";
    } catch (const IndexError& e) {
      EXPECT_STREQ(e.what(), "Target 5 is out of bounds.");
    }
    host::launch_nll_loss(call, nullptr);  // the launch itself succeeds (asynchronous error)
    EXPECT_EQ(synchronize_and_reset(), kDeviceAssertMessage) << "reduction " << reduction;
  }
}

TEST(TrainingKernelsOnHost, BatchNormStatsMatchCpu) {
  manual_seed(16);
  // {4, 3, 1000}: each channel's block folds 4000 elements, 16 per thread.
  for (DType d : kFloatTypes) {
    for (const IntList& sizes : std::vector<IntList>{{2, 1, 1}, {4, 3, 5}, {1, 6, 7}, {2, 0, 3}, {4, 3, 1000}}) {
      for (bool transposed : {false, true}) {  // channels innermost in memory (channels last)
        Tensor in = transposed ? random({sizes[0], sizes[2], sizes[1]}, d).transpose(1, 2) : random(sizes, d);
        KernelCall call{OpKind::BatchNormStats, {TensorArg{}, TensorArg{}}, {arg(in)}};
        compare_outputs(call, {empty({sizes[1]}, d), empty({sizes[1]}, d)}, transposed ? "channels last" : "", 1e-5,
                        1e-5);
      }
    }
  }
}

// One OptimizerStep call over `sizes` (params, gradients and state in d), run on both
// backends from the same starting values; every param and state must agree.
// With `device_step` (a capturable step), both read the step count from it instead. With a
// `found_inf` flag (a GradScaler's step on the device) both skip the step when it is 1.
void compare_step(const detail::StepHyper& hyper, const std::vector<int64_t>& sizes, DType d, bool first_step,
                  const std::string& what, const float* device_step = nullptr, const Tensor& found_inf = Tensor()) {
  auto step = std::make_shared<detail::FusedStep>();
  step->hyper = hyper;
  const int per_tensor = 1 + step->state_count();
  std::vector<Tensor> cpu_out, host_out, grads;
  KernelCall call{OpKind::OptimizerStep, {}, {}};
  for (size_t i = 0; i < sizes.size(); ++i) {
    detail::StepTensor t;
    t.first_step = first_step;
    t.step_size = hyper.lr / (1 - std::pow(hyper.beta1, 3.0));
    t.bias_correction2_sqrt = std::sqrt(1 - std::pow(hyper.beta2, 3.0));
    t.device_step = device_step;
    step->tensors.push_back(t);
    for (int k = 0; k < per_tensor; ++k) {
      Tensor v = random({sizes[i]}, d);
      if (k == 2) v = v.abs();  // Adam's exp_avg_sq is non-negative
      cpu_out.push_back(v);
      host_out.push_back(v.clone());
      call.outputs.push_back(arg(v));
    }
    grads.push_back(random({sizes[i]}, d));
    call.inputs.push_back(arg(grads.back()));
  }
  std::vector<Tensor> before;
  for (const Tensor& t : cpu_out) before.push_back(t.clone());
  if (found_inf.defined()) {
    step->skip_if_found_inf = true;
    call.inputs.push_back(arg(found_inf));
  }
  call.payload = step;
  detail::cpu::run(call);
  for (size_t k = 0; k < host_out.size(); ++k) call.outputs[k] = arg(host_out[k]);
  launch_on_host(call);
  host::check_cuda(cudaStreamSynchronize(nullptr));
  for (size_t k = 0; k < host_out.size(); ++k) {
    expect_same(host_out[k], cpu_out[k],
                what + " tensor " + std::to_string(k / per_tensor) + " operand " + std::to_string(k % per_tensor), 1e-5,
                1e-5);
    if (found_inf.defined() && found_inf.item<float>() != 0) {
      expect_same(cpu_out[k], before[k], what + " skipped: operand " + std::to_string(k), 0, 0);
    }
  }
}

TEST(TrainingKernelsOnHost, OptimizerStepMatchesCpu) {
  manual_seed(17);
  // Empty and size-1 tensors between others, one tensor longer than the grid's threads,
  // and 30 tensors: two launches of at most 24 (kMaxTensors).
  const std::vector<int64_t> mixed = {5, 0, 1, 70001, 0, 33};
  std::vector<int64_t> many;
  for (int i = 0; i < 30; ++i) many.push_back(i % 4 == 0 ? 0 : 3 * i + 1);
  detail::StepHyper sgd;
  sgd.lr = 0.1;
  detail::StepHyper momentum = sgd;
  momentum.momentum = 0.9;
  momentum.dampening = 0.1;
  momentum.weight_decay = 0.01;
  detail::StepHyper nesterov = momentum;
  nesterov.dampening = 0;
  nesterov.nesterov = true;
  nesterov.maximize = true;
  detail::StepHyper adam;
  adam.rule = detail::UpdateRule::Adam;
  adam.lr = 0.01;
  adam.weight_decay = 0.1;
  detail::StepHyper adamw = adam;
  adamw.decoupled_weight_decay = true;
  adamw.maximize = true;
  for (DType d : kFloatTypes) {
    compare_step(sgd, mixed, d, false, "sgd");
    compare_step(adam, many, d, false, "adam, found_inf 0", nullptr, zeros({1}));
    compare_step(adam, many, d, false, "adam, found_inf 1", nullptr, ones({1}));
    compare_step(momentum, mixed, d, false, "momentum, found_inf 1", nullptr, ones({1}));
    compare_step(momentum, mixed, d, true, "momentum first step");
    compare_step(momentum, many, d, false, "momentum");
    compare_step(nesterov, mixed, d, false, "nesterov maximize");
    compare_step(adam, many, d, false, "adam");
    compare_step(adamw, mixed, d, false, "adamw maximize");
    // capturable: the step count read from memory when the kernel runs.
    const float first = 1, seventh = 7;
    compare_step(momentum, mixed, d, false, "momentum, device step 1", &first);
    compare_step(momentum, mixed, d, true, "momentum, device step 7", &seventh);
    compare_step(adam, many, d, false, "adam, device step 7", &seventh);
  }
}

}  // namespace
}  // namespace ember::host_test
