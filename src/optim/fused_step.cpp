// fused_step: groups a parameter list by device and dtype and launches one
// OptimizerStep KernelCall per group (Note [Fused optimizer step]).
//
// Note [Gradient layout]
// The kernel walks every operand of a tensor flat, element j of the parameter with
// element j of its gradient and state. That is only right when all of them are dense
// with the same strides; a flat walk over, say, a transposed gradient would pair the
// wrong elements silently. So: state tensors are made contiguous by the optimizers; a
// gradient that is not contiguous is copied into a contiguous one (autograd's
// gradients of contiguous parameters already are); a parameter that is not contiguous
// is updated through a contiguous copy that is then copied back. A gradient of another
// dtype is converted to the parameter's, as the update is computed in its type.
#include "optim/fused_step.h"

#include <algorithm>
#include <memory>

#include "core/tensor_impl.h"
#include "ember/errors.h"
#include "ops/launch.h"
#include "optim/amp_step.h"

namespace ember::detail::optim {
namespace {

// A dense operand as the kernel sees it: real elements in a flat run.
TensorArg flat_arg(const Tensor& t) {
  EMBER_ASSERT(t.is_contiguous());
  const int64_t n = is_complex(t.dtype()) ? 2 * t.numel() : t.numel();
  return TensorArg{t.impl()->data(), to_real(t.dtype()), {n}, {1}};  // not a host access: the launch is
}

}  // namespace

void fused_step(const StepHyper& hyper, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<std::vector<Tensor>>& states, const std::vector<StepTensor>& tensors) {
  EMBER_ASSERT(params.size() == grads.size() && params.size() == states.size() && params.size() == tensors.size());
  // Checks and layout first (Note [Gradient layout]): nothing is updated if one fails.
  std::vector<Tensor> work(params.size()), flat_grads(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    Tensor g = grads[i];
    EMBER_CHECK(is_floating_point(p.dtype()) || is_complex(p.dtype()), TypeError,
                "optimizer step: parameters must be floating point or complex, but got ", dtype_name(p.dtype()));
    EMBER_CHECK(g.sizes() == p.sizes(), ValueError, "optimizer step: the gradient of shape ", IntListPrinter{g.sizes()},
                " does not match its parameter of shape ", IntListPrinter{p.sizes()});
    check_same_device(p, g);
    if (g.dtype() != p.dtype()) g = g.to(p.dtype());
    flat_grads[i] = g.contiguous();
    work[i] = p.contiguous();
    for (const Tensor& s : states[i])
      EMBER_ASSERT(s.is_contiguous() && s.device() == p.device() && s.dtype() == p.dtype());
  }
  // One launch per (device, dtype).
  struct Group {
    Device device;
    DType dtype;
    std::vector<size_t> members;
  };
  std::vector<Group> groups;
  for (size_t i = 0; i < params.size(); ++i) {
    auto found = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.device == params[i].device() && g.dtype == params[i].dtype();
    });
    if (found == groups.end()) groups.push_back(Group{params[i].device(), params[i].dtype(), {i}});
    else found->members.push_back(i);
  }
  for (const Group& group : groups) {
    auto step = std::make_shared<FusedStep>();
    step->hyper = hyper;
    KernelCall call;
    call.op = OpKind::OptimizerStep;
    for (size_t i : group.members) {
      EMBER_ASSERT(static_cast<int>(states[i].size()) == step->state_count());
      step->tensors.push_back(tensors[i]);
      call.outputs.push_back(flat_arg(work[i]));
      for (const Tensor& s : states[i]) call.outputs.push_back(flat_arg(s));
      call.inputs.push_back(flat_arg(flat_grads[i]));
    }
    if (amp_found_inf() != nullptr) {  // a GradScaler's device-side step
      const Tensor flag = amp_found_inf_on(group.device);
      EMBER_ASSERT(flag.defined() && flag.dtype() == kFloat32 && flag.numel() == 1);
      step->skip_if_found_inf = true;
      call.inputs.push_back(make_arg(flag));
    }
    call.payload = std::move(step);
    launch(group.device, call);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (work[i].is_same(params[i])) continue;
    Tensor param = params[i];
    param.copy_(work[i]);
  }
}

}  // namespace ember::detail::optim
