// nn::utils::clip_grad_norm_ and clip_grad_value_ (torch.nn.utils.clip_grad).
//
// Note [Clipping without a sync]
// As PyTorch 2's foreach path: the gradients are grouped by device and dtype; each group's
// norm is computed from one flat concatenation of its gradients (a fixed number of launches
// per group, however many parameters it holds, as torch._foreach_norm), the group norms meet
// on the first gradient's device for the total, and the clip coefficient
// min(1, max_norm / (total + 1e-6)) stays a device tensor that every gradient is multiplied
// by, in one ForeachMul launch per group: nothing waits for the device unless
// error_if_nonfinite asks to look at the total.
#include <algorithm>
#include <cmath>

#include "ember/autograd.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/nn/utils.h"
#include "ember/ops.h"
#include "nn/python_repr.h"
#include "ops/foreach.h"

namespace ember::nn::utils {
namespace {

// torch.linalg.vector_norm(x, p) of a flat tensor.
Tensor vector_norm(const Tensor& flat, double p) {
  if (std::isinf(p)) return p > 0 ? flat.abs().max() : flat.abs().min();
  if (p == 0) return flat.ne(0).to(flat.dtype()).sum();
  if (p == 1) return flat.abs().sum();
  if (p == 2) return flat.mul(flat).sum().sqrt();
  return flat.abs().pow(p).sum().pow(1.0 / p);
}

struct Group {
  Device device;
  DType dtype;
  std::vector<Tensor> grads;
};

std::vector<Group> grads_by_device_and_dtype(const std::vector<Tensor>& parameters) {
  std::vector<Group> groups;
  for (const Tensor& p : parameters) {
    if (!p.defined() || !p.grad().defined()) continue;
    const Tensor& g = p.grad();
    auto found = std::find_if(groups.begin(), groups.end(),
                              [&](const Group& x) { return x.device == g.device() && x.dtype == g.dtype(); });
    if (found == groups.end()) groups.push_back(Group{g.device(), g.dtype(), {g}});
    else found->grads.push_back(g);
  }
  return groups;
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  NoGradGuard no_grad;
  const std::vector<Group> groups = grads_by_device_and_dtype(parameters);
  if (groups.empty()) return tensor(0.0f);
  for (const Group& group : groups) {
    EMBER_CHECK(is_floating_point(group.dtype), TypeError, "clip_grad_norm_: gradients must be floating point, got ",
                group.dtype);
  }
  const Device first_device = groups.front().device;
  DType total_dtype = groups.front().dtype;
  std::vector<Tensor> norms;
  for (const Group& group : groups) {
    std::vector<Tensor> flat;
    flat.reserve(group.grads.size());
    for (const Tensor& g : group.grads) flat.push_back(g.reshape({-1}));
    if (norm_type == 0) {
      // Note [Norm of order 0]: PyTorch takes each gradient's norm, then the norm of those
      // norms; for order 0 that counts the gradients with a non-zero element, not the
      // non-zero elements of them all, so the flat concatenation does not serve. The count
      // of each group is summed across groups below.
      std::vector<Tensor> nonzero;
      nonzero.reserve(flat.size());
      for (const Tensor& f : flat) nonzero.push_back(f.ne(0).sum().ne(0));
      norms.push_back((nonzero.size() == 1 ? nonzero.front() : stack(nonzero)).to(group.dtype).sum());
    } else {
      // Every other order composes: the norm of per-gradient norms is the norm of all elements.
      norms.push_back(vector_norm(flat.size() == 1 ? flat.front() : cat(flat), norm_type));
    }
    total_dtype = promote_types(total_dtype, group.dtype);
  }
  Tensor total;
  if (norms.size() == 1) {
    total = norms.front();
  } else {
    for (Tensor& n : norms) n = n.to(TensorOptions(first_device).dtype(total_dtype));
    total = norm_type == 0 ? stack(norms).sum() : vector_norm(stack(norms), norm_type);
  }
  if (error_if_nonfinite) {
    const double value = total.to(kFloat64).item<double>();
    EMBER_CHECK(std::isfinite(value), Error, "The total norm of order ", detail::python_float(norm_type),
                " for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error and "
                "scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`");
  }
  const Tensor coef = (max_norm / (total + 1e-6)).clamp(std::nullopt, 1.0);
  for (const Group& group : groups) {
    detail::foreach_mul_(group.grads, coef.to(TensorOptions(group.device).dtype(group.dtype)));
  }
  return total;
}

Tensor clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type, bool error_if_nonfinite) {
  return clip_grad_norm_(std::vector<Tensor>{parameter}, max_norm, norm_type, error_if_nonfinite);
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  NoGradGuard no_grad;
  for (const Tensor& p : parameters) {
    if (!p.defined() || !p.grad().defined()) continue;
    Tensor g = p.grad();
    // As PyTorch's clamp_(min=-v, max=v): a NaN bound makes every element NaN.
    if (std::isnan(clip_value)) g.fill_(clip_value);
    else g.copy_(g.clamp(-clip_value, clip_value));
  }
}

void clip_grad_value_(const Tensor& parameter, double clip_value) {
  clip_grad_value_(std::vector<Tensor>{parameter}, clip_value);
}

}  // namespace ember::nn::utils
