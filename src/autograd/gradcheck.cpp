// gradcheck: analytical gradients (one backward pass per output element) against central
// finite differences. Complex numbers count as pairs of reals: a complex input is
// perturbed along 1 and i, a complex output is checked through its real and imaginary
// parts (grad_output 1 and i: PyTorch's convention makes backward with grad_output v
// the gradient of Re(conj(v) * out)).
#include <cmath>
#include <complex>
#include <sstream>

#include "ember/autograd.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"

namespace ember::autograd {

namespace {

using C = std::complex<double>;

std::vector<C> values(const Tensor& t) {
  if (is_complex(t.dtype())) return t.to_vector<C>();
  auto real = t.to_vector<double>();
  return std::vector<C>(real.begin(), real.end());
}

std::vector<std::vector<C>> evaluate(const GradcheckFn& fn, const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  std::vector<std::vector<C>> out;
  for (const Tensor& t : fn(inputs)) out.push_back(values(t));
  return out;
}

}  // namespace

bool gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps, double atol, double rtol) {
  std::vector<Tensor> outputs = fn(inputs);
  std::vector<size_t> diff;  // inputs that require grad
  std::vector<Tensor> diff_inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined() && inputs[i].requires_grad()) {
      diff.push_back(i);
      diff_inputs.push_back(inputs[i]);
    }
  }
  EMBER_CHECK(!diff.empty(), ValueError, "gradcheck expects at least one input tensor to require gradient");

  // numerical[d][q][j] = per output: d out / d (input diff[d], element j, part q)
  std::vector<std::vector<std::vector<std::vector<std::vector<C>>>>> numerical(diff.size());
  for (size_t d = 0; d < diff.size(); ++d) {
    const Tensor& x = inputs[diff[d]];
    int parts = is_complex(x.dtype()) ? 2 : 1;
    numerical[d].resize(parts);
    std::vector<Tensor> probe;
    for (const Tensor& t : inputs) probe.push_back(t.defined() ? t.detach().clone() : t);
    Tensor flat = probe[diff[d]].view({-1});
    for (int q = 0; q < parts; ++q) {
      Scalar step = q == 0 ? Scalar(eps) : Scalar(C(0, eps));
      Scalar back = q == 0 ? Scalar(-2 * eps) : Scalar(C(0, -2 * eps));
      Scalar restore = q == 0 ? Scalar(eps) : Scalar(C(0, eps));
      for (int64_t j = 0; j < flat.numel(); ++j) {
        Tensor element = flat.narrow(0, j, 1);
        NoGradGuard no_grad;
        element += step;
        auto plus = evaluate(fn, probe);
        element += back;
        auto minus = evaluate(fn, probe);
        element += restore;
        std::vector<std::vector<C>> derivative(plus.size());
        for (size_t o = 0; o < plus.size(); ++o) {
          derivative[o].resize(plus[o].size());
          for (size_t k = 0; k < plus[o].size(); ++k) derivative[o][k] = (plus[o][k] - minus[o][k]) / (2 * eps);
        }
        numerical[d][q].push_back(std::move(derivative));
      }
    }
  }

  struct Mismatch {
    double difference = 0;
    std::string where;
  } worst;
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Tensor& out = outputs[o];
    if (!out.requires_grad()) continue;
    int out_parts = is_complex(out.dtype()) ? 2 : 1;
    for (int64_t k = 0; k < out.numel(); ++k) {
      for (int p = 0; p < out_parts; ++p) {
        Tensor v = zeros_like(out);
        v.view({-1}).narrow(0, k, 1).fill_(p == 0 ? Scalar(1.0) : Scalar(C(0, 1)));
        auto grads = grad({out}, diff_inputs, {v}, /*retain_graph=*/true, false, /*allow_unused=*/true);
        for (size_t d = 0; d < diff.size(); ++d) {
          std::vector<C> analytical =
              grads[d].defined() ? values(grads[d]) : std::vector<C>(static_cast<size_t>(diff_inputs[d].numel()));
          for (size_t q = 0; q < numerical[d].size(); ++q) {
            for (size_t j = 0; j < analytical.size(); ++j) {
              C n = numerical[d][q][j][o][static_cast<size_t>(k)];
              double num = p == 0 ? n.real() : n.imag();
              double ana = q == 0 ? analytical[j].real() : analytical[j].imag();
              double difference = std::isnan(ana) != std::isnan(num) ? INFINITY : std::abs(num - ana);
              if (difference > atol + rtol * std::abs(num) && difference > worst.difference) {
                std::ostringstream where;
                where << "output " << o << " with respect to input " << diff[d] << " (largest difference at d output["
                      << k << "]" << (p ? ".imag" : "") << " / d input[" << j << "]" << (q ? ".imag" : "")
                      << ": numerical " << num << ", analytical " << ana << ", difference " << difference << ")";
                worst = {difference, where.str()};
              }
            }
          }
        }
      }
    }
  }
  EMBER_CHECK(worst.where.empty(), Error, "Jacobian mismatch for ", worst.where);
  return true;
}

}  // namespace ember::autograd
