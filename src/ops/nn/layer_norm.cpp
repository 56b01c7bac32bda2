// layer_norm: one LayerNorm launch over the input viewed as {rows, cols} (the normalized
// dims flattened) writes the output and each row's mean and rstd; the node keeps the
// latter two for its backward, one LayerNormBackward launch (transformer_backward.h).

#include "ember/errors.h"
#include "ember/nn/functional.h"
#include "kernels/transformer_kernels.h"
#include "ops/autocast.h"
#include "ops/launch.h"
#include "ops/nn/transformer_backward.h"
#include "ops/op_entry.h"
#include "ops/recording.h"

namespace ember::nn::functional {
namespace {

void check_affine(const Tensor& t, const char* name, const Tensor& input, const IntList& normalized_shape) {
  if (!t.defined()) return;
  EMBER_CHECK(t.sizes() == normalized_shape, ValueError, "Expected ", name,
              " to be of same shape as normalized_shape, but got ", name, " of shape ",
              ember::detail::IntListPrinter{t.sizes()},
              " and normalized_shape = ", ember::detail::IntListPrinter{normalized_shape});
  detail::check_same_device(input, t);
  EMBER_CHECK(t.dtype() == input.dtype(), TypeError, "layer_norm: expected ", name, " of dtype ",
              dtype_name(input.dtype()), " (the input's), but got ", dtype_name(t.dtype()));
}

struct Forward {
  Tensor out, mean, rstd;
};

Forward layer_norm_forward(const Tensor& input, int64_t rows, int64_t cols, const Tensor& weight, const Tensor& bias,
                           double eps) {
  Tensor x = input.contiguous().view({rows, cols});
  Forward f{detail::empty_on({rows, cols}, input.dtype(), input.device()),
            detail::empty_on({rows}, input.dtype(), input.device()),
            detail::empty_on({rows}, input.dtype(), input.device())};
  if (rows > 0 && cols > 0) {
    detail::KernelCall call{detail::OpKind::LayerNorm,
                            {detail::make_arg(f.out), detail::make_arg(f.mean), detail::make_arg(f.rstd)},
                            {detail::make_arg(x)}};
    detail::kargs::LayerNorm args{0, eps};
    // Operands live until the launch: a freed temporary's memory could be handed out again.
    const Tensor w = weight.defined() ? weight.contiguous().view({cols}) : Tensor();
    const Tensor b = bias.defined() ? bias.contiguous().view({cols}) : Tensor();
    if (w.defined()) {
      detail::add_arg(call.inputs, w);
      args.parts |= detail::kLayerNormWeight;
    }
    if (b.defined()) {
      detail::add_arg(call.inputs, b);
      args.parts |= detail::kLayerNormBias;
    }
    call.args = args;
    detail::launch(input.device(), call);
  }
  f.out = f.out.view(input.sizes());
  return f;
}

}  // namespace

Tensor layer_norm(const Tensor& input, const IntList& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  auto compute = [&](const Tensor& input, const Tensor& weight, const Tensor& bias) {
    const auto nd = static_cast<int64_t>(normalized_shape.size());
    EMBER_CHECK(nd >= 1, ValueError,
                "Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                "least one element, but got normalized_shape = ",
                ember::detail::IntListPrinter{normalized_shape});
    check_affine(weight, "weight", input, normalized_shape);
    check_affine(bias, "bias", input, normalized_shape);
    bool matches = input.dim() >= nd;
    for (int64_t i = 0; matches && i < nd; ++i) matches = input.size(input.dim() - nd + i) == normalized_shape[i];
    EMBER_CHECK(
        matches, ValueError, "Given normalized_shape=", ember::detail::IntListPrinter{normalized_shape},
        ", expected input with shape [*",
        [&] {
          std::string s;
          for (int64_t v : normalized_shape) s += ", " + std::to_string(v);
          return s;
        }(),
        "], but got input of size", ember::detail::IntListPrinter{input.sizes()});
    EMBER_CHECK(is_floating_point(input.dtype()), TypeError, "\"LayerNormKernelImpl\" not implemented for '",
                detail::scalar_type_name(input.dtype()), "'");
    int64_t cols = 1;
    for (int64_t s : normalized_shape) cols *= s;
    const int64_t rows = cols == 0 ? 0 : input.numel() / cols;
    if (!detail::should_record({&input, &weight, &bias}))
      return layer_norm_forward(input, rows, cols, weight, bias, eps).out;
    Forward f;
    {
      NoGradGuard no_grad;
      f = layer_norm_forward(input, rows, cols, weight, bias, eps);
    }
    detail::record(detail::Formula::LayerNorm, {input, weight, bias}, std::vector<Tensor*>{&f.out, &f.mean, &f.rstd},
                   detail::LayerNormArgs{nd, eps});
    return f.out;
  };
  return ember::detail::op_entry({ember::detail::AutocastOp::kLayerNorm}, compute, input, weight, bias);
}

}  // namespace ember::nn::functional

namespace ember::detail::nn {

LayerNormGrads layer_norm_backward(const Tensor& grad_output, const Tensor& input, const Tensor& mean,
                                   const Tensor& rstd, const Tensor& weight, int64_t normalized_dims, bool need_input,
                                   bool need_weight, bool need_bias) {
  const int64_t rows = mean.numel();
  int64_t cols = 1;
  for (int64_t d = input.dim() - normalized_dims; d < input.dim(); ++d) cols *= input.size(d);
  LayerNormGrads grads;
  KernelCall call{OpKind::LayerNormBackward, {}, {}};
  // Operands live until the launch: the gradients allocated below could otherwise be given
  // the memory of a freed contiguous copy that the kernel still reads.
  const Tensor g = grad_output.contiguous().view({rows, cols});
  const Tensor x = input.contiguous().view({rows, cols});
  const Tensor w = weight.defined() ? weight.contiguous().view({cols}) : Tensor();
  add_arg(call.inputs, g);
  add_arg(call.inputs, x);
  add_arg(call.inputs, mean);
  add_arg(call.inputs, rstd);
  kargs::LayerNorm args;
  if (w.defined()) {
    add_arg(call.inputs, w);
    args.parts |= kLayerNormWeight;
  }
  if (need_input) {
    grads.input = empty_on(input.sizes(), input.dtype(), input.device());
    add_arg(call.outputs, grads.input.view({rows, cols}));
    args.parts |= kLayerNormGradInput;
  }
  if (need_weight) {
    grads.weight = empty_on(weight.sizes(), input.dtype(), input.device());
    add_arg(call.outputs, grads.weight.view({cols}));
    args.parts |= kLayerNormGradWeight;
  }
  if (need_bias) {
    IntList shape(input.sizes().end() - normalized_dims, input.sizes().end());
    grads.bias = empty_on(shape, input.dtype(), input.device());
    add_arg(call.outputs, grads.bias.view({cols}));
    args.parts |= kLayerNormGradBias;
  }
  call.args = args;
  if (call.outputs.empty()) return grads;
  if (rows == 0 || cols == 0) {  // nothing to sum: zero gradients
    for (Tensor* t : {&grads.input, &grads.weight, &grads.bias}) {
      if (t->defined()) t->zero_();
    }
    return grads;
  }
  launch(input.device(), call);
  return grads;
}

}  // namespace ember::detail::nn
