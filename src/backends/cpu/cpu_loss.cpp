// NllLoss (contract in kernels/loss_kernels.h).
#include "backends/cpu/cpu_loops.h"
#include "backends/cpu/cpu_ops.h"
#include "kernels/loss_kernels.h"

namespace ember::detail::cpu {
namespace {

template <typename T>
void nll_typed(const KernelCall& call) {
  const TensorArg &in = call.inputs[0], &target = call.inputs[1];
  const TensorArg &loss = call.outputs[0], &counted = call.outputs[1];
  const int64_t batch = in.sizes[0], classes = in.sizes[1], spatial = in.sizes[2];
  const auto& args = call.arg<kargs::NllLoss>();
  const int64_t ignore = args.ignore_index;
  const auto* t = static_cast<const int64_t*>(target.data);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t s = 0; s < spatial; ++s) {
      const int64_t c = t[n * target.strides[0] + s * target.strides[1]];
      EMBER_CHECK(c == ignore || (c >= 0 && c < classes), IndexError, "Target ", c, " is out of bounds.");
    }
  }
  const T* x = static_cast<const T*>(in.data);
  T* l = static_cast<T*>(loss.data);
  T* w = static_cast<T*>(counted.data);
  auto value = [&](int64_t n, int64_t s, int64_t c) {
    return convert<double>(x[n * in.strides[0] + c * in.strides[1] + s * in.strides[2]]);
  };
  if (args.reduction != 0) {  // reduced: one pass in double
    double sum = 0, count = 0;
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t s = 0; s < spatial; ++s) {
        const int64_t c = t[n * target.strides[0] + s * target.strides[1]];
        if (c == ignore) continue;
        sum -= value(n, s, c);
        count += 1;
      }
    }
    *l = convert<T>(args.reduction == 2 ? sum / count : sum);
    *w = convert<T>(count);
    return;
  }
  parallel_for(0, batch * spatial, kGrainSize, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t n = i / spatial, s = i % spatial;
      const int64_t c = t[n * target.strides[0] + s * target.strides[1]];
      const bool use = c != ignore;
      l[n * loss.strides[0] + s * loss.strides[1]] = convert<T>(use ? -value(n, s, c) : 0.0);
      w[n * counted.strides[0] + s * counted.strides[1]] = convert<T>(use ? 1.0f : 0.0f);
    }
  });
}

}  // namespace

void run_nll_loss(const KernelCall& call) {
  EMBER_CHECK(call.inputs.size() == 2 && call.outputs.size() == 2, ValueError,
              "nll_loss: expected 2 inputs and 2 outputs");
  EMBER_ASSERT(call.inputs[0].sizes.size() == 3 && call.inputs[1].sizes.size() == 2);
  expect_dtype("nll_loss", call.inputs[1], kInt64);
  dispatch(call.inputs[0].dtype, [&]<typename T>(TypeTag<T>) {
    if constexpr (!is_floating_v<T>) not_implemented("nll_loss_forward_out_frame", call.inputs[0].dtype);
    else nll_typed<T>(call);
  });
}

}  // namespace ember::detail::cpu
