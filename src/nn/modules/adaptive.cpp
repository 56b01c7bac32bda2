// nn::AdaptiveLogSoftmaxWithLoss, composed of public ops (linear, log_softmax, gather,
// index_select, index_add, cat), so that it runs and differentiates on every backend.
//
// Note [Adaptive softmax splits the batch on the host]
// forward() reads the targets on the host once: to check their range, to split the batch by
// cluster and to build the index tensors (the rows of each cluster, their targets relative to
// the cluster's first class, the head column each row reads). PyTorch synchronizes there too
// (nonzero() and the sizes of its results). The device then runs the head, its log_softmax and
// a gather of one column per row; and for each cluster that has rows, index_select of those
// rows, the tail, its log_softmax and a gather, added into a zero vector by index_add. A row
// belongs to one cluster, so index_add writes each row at most once: it is PyTorch's
// index_copy_, with the same backward (the gradient's rows picked by index_select). The sum
// tail + head is PyTorch's `output += head_part` (0 + x is x exactly for shortlist rows).
#include "ember/nn/modules/adaptive.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/tensor_impl.h"
#include "ember/autograd.h"
#include "ember/factories.h"
#include "ember/ops.h"
#include "nn/copy_module.h"
#include "ops/launch.h"

namespace ember::nn {
namespace {

constexpr const char* kCutoffsMessage =
    "cutoffs should be a sequence of unique, positive integers sorted in an increasing order, where each value is "
    "between 1 and n_classes-1";

bool valid_cutoffs(const std::vector<int64_t>& cutoffs, int64_t n_classes) {
  if (cutoffs.empty()) return false;  // PyTorch's min() of an empty list fails too
  for (size_t i = 0; i < cutoffs.size(); ++i) {
    if (cutoffs[i] <= 0 || cutoffs[i] > n_classes - 1) return false;
    if (i > 0 && cutoffs[i] <= cutoffs[i - 1]) return false;
  }
  return true;
}

// Python's float floor division (float_floor_div in CPython), so that a tail's hidden size is
// PyTorch's int(in_features // div_value ** (i + 1)) for every div_value.
double python_floor_divide(double a, double b) {
  const double mod = std::fmod(a, b);
  double quotient = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) quotient -= 1.0;
  double floored = std::floor(quotient);
  if (quotient - floored > 0.5) floored += 1.0;
  return floored;
}

// A 1-D int64 tensor of `values` on `device`.
Tensor index_tensor(const std::vector<int64_t>& values, Device device) {
  Tensor host = empty({static_cast<int64_t>(values.size())}, TensorOptions(kInt64));
  if (!values.empty()) std::memcpy(host.data_ptr(), values.data(), values.size() * sizeof(int64_t));
  return host.to(device);
}

// PyTorch's checks of forward's shapes, in its order.
void check_forward_shapes(const Tensor& input, const Tensor& target) {
  if (target.dim() == 1) {
    EMBER_CHECK(input.size(0) == target.size(0), ValueError,
                "Input and target should have the same size in the batch dimension.");
    EMBER_CHECK(input.dim() == 2, ValueError, "1D target tensor expects 2D input tensors, but found inputs with size ",
                detail::IntListPrinter{input.sizes()});
  } else if (target.dim() == 0) {
    EMBER_CHECK(input.dim() == 1, ValueError, "0D target tensor expects 1D input tensors, but found inputs with size ",
                detail::IntListPrinter{input.sizes()});
  } else {
    detail::fail<ValueError>("0D or 1D target tensor expected, multi-target not supported");
  }
  EMBER_CHECK(target.dtype() == kInt64, TypeError,
              "AdaptiveLogSoftmaxWithLoss: expected target of dtype int64 (class indices), but got ", target.dtype());
  detail::check_same_device(input, target);
}

}  // namespace

AdaptiveLogSoftmaxWithLoss::AdaptiveLogSoftmaxWithLoss(int64_t in_features, int64_t n_classes,
                                                       const std::vector<int64_t>& given_cutoffs, double div_value,
                                                       bool head_bias)
    : in_features(in_features),
      n_classes(n_classes),
      cutoffs(given_cutoffs),
      div_value(div_value),
      head_bias(head_bias) {
  EMBER_CHECK(valid_cutoffs(given_cutoffs, n_classes), ValueError, kCutoffsMessage);
  cutoffs.push_back(n_classes);
  shortlist_size = cutoffs[0];
  n_clusters = static_cast<int64_t>(cutoffs.size()) - 1;
  head_size = shortlist_size + n_clusters;
  head = register_module("head", std::make_shared<Linear>(in_features, head_size, head_bias));
  tail = register_module("tail", std::make_shared<ModuleList>());
  for (int64_t i = 0; i < n_clusters; ++i) {
    const double hidden = python_floor_divide(static_cast<double>(in_features), std::pow(div_value, i + 1));
    EMBER_CHECK(std::isfinite(hidden) && std::abs(hidden) < 9.0e18, ValueError,
                "AdaptiveLogSoftmaxWithLoss: div_value=", div_value, " gives cluster ", i,
                " no hidden size (in_features // div_value ** ", i + 1, " is ", hidden, ")");
    const auto hsz = static_cast<int64_t>(hidden);
    const int64_t osz = cutoffs[i + 1] - cutoffs[i];
    tail->push_back(std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
        std::make_shared<Linear>(in_features, hsz, false), std::make_shared<Linear>(hsz, osz, false)}));
  }
}

void AdaptiveLogSoftmaxWithLoss::reset_parameters() {
  head->reset_parameters();
  for (const auto& projection : *tail) {
    for (const auto& layer : projection->children()) std::dynamic_pointer_cast<Linear>(layer)->reset_parameters();
  }
}

ASMoutput AdaptiveLogSoftmaxWithLoss::forward(const Tensor& input_arg, const Tensor& target_arg) {
  check_forward_shapes(input_arg, target_arg);
  const bool batched = target_arg.dim() == 1;
  const Tensor input = batched ? input_arg : input_arg.unsqueeze(0);
  const std::vector<int64_t> target = target_arg.reshape({-1}).to_vector<int64_t>();
  const auto batch = static_cast<int64_t>(target.size());

  // Note [Adaptive softmax splits the batch on the host].
  std::vector<int64_t> head_column(target.size());
  std::vector<std::vector<int64_t>> rows(n_clusters), relative(n_clusters);
  bool in_range = true;
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t t = target[i];
    if (t < 0 || t >= n_classes) {
      in_range = false;
    } else if (t < shortlist_size) {
      head_column[i] = t;
    } else {
      const int64_t cluster = std::upper_bound(cutoffs.begin(), cutoffs.end(), t) - cutoffs.begin() - 1;
      head_column[i] = shortlist_size + cluster;
      rows[cluster].push_back(i);
      relative[cluster].push_back(t - cutoffs[cluster]);
    }
  }
  if (!in_range) {
    const auto [low, high] = std::minmax_element(target.begin(), target.end());
    detail::fail<ValueError>("Target values should be in [0, ", n_classes - 1, "], but values in range [", *low, ", ",
                             *high, "] were found.");
  }

  const Device device = input.device();
  Tensor tail_part;
  for (int64_t c = 0; c < n_clusters; ++c) {
    if (rows[c].empty()) continue;  // this tail does not run (and gets no gradient), as PyTorch's
    const Tensor row_index = index_tensor(rows[c], device);
    const Tensor cluster_logprob = log_softmax((*tail)[c]->forward(input.index_select(0, row_index)), 1);
    const Tensor local = cluster_logprob.gather(1, index_tensor(relative[c], device).unsqueeze(1)).squeeze(1);
    tail_part = (tail_part.defined() ? tail_part : zeros({batch}, input.options())).index_add(0, row_index, local);
  }
  const Tensor head_logprob = log_softmax(head->forward(input), 1);
  const Tensor head_part = head_logprob.gather(1, index_tensor(head_column, device).unsqueeze(1)).squeeze(1);
  Tensor output = tail_part.defined() ? tail_part + head_part : head_part;
  Tensor loss = (-output).mean();
  return {batched ? output : output.squeeze(0), loss};
}

Tensor AdaptiveLogSoftmaxWithLoss::full_log_prob(const Tensor& input, const Tensor& head_output) {
  const Tensor head_logprob = log_softmax(head_output, 1);
  std::vector<Tensor> columns{head_logprob.narrow(1, 0, shortlist_size)};
  for (int64_t c = 0; c < n_clusters; ++c) {
    const Tensor cluster_logprob = log_softmax((*tail)[c]->forward(input), 1);
    columns.push_back(cluster_logprob + head_logprob.narrow(1, shortlist_size + c, 1));
  }
  return cat(columns, 1);
}

Tensor AdaptiveLogSoftmaxWithLoss::log_prob(const Tensor& input) { return full_log_prob(input, head->forward(input)); }

Tensor AdaptiveLogSoftmaxWithLoss::predict(const Tensor& input) {
  NoGradGuard no_grad;  // the result is an index: nothing to differentiate
  const Tensor head_output = head->forward(input);
  const Tensor output = head_output.argmax(1);
  const std::vector<int64_t> best = output.to_vector<int64_t>();
  std::vector<int64_t> tail_rows;
  for (size_t i = 0; i < best.size(); ++i) {
    if (best[i] >= shortlist_size) tail_rows.push_back(static_cast<int64_t>(i));
  }
  if (tail_rows.empty()) return output;  // every row's best class is in the shortlist: no tail runs
  if (tail_rows.size() == best.size()) return full_log_prob(input, head_output).argmax(1);
  // Only the rows whose head prefers a cluster need the full distribution.
  const Tensor row_index = index_tensor(tail_rows, input.device());
  const Tensor refined =
      full_log_prob(input.index_select(0, row_index), head_output.index_select(0, row_index)).argmax(1);
  return output.masked_fill(output.ge(shortlist_size), 0).index_add(0, row_index, refined);
}

std::shared_ptr<Module> AdaptiveLogSoftmaxWithLoss::clone() const {
  return detail::nn::clone_as(*this, [&] {
    const std::vector<int64_t> given(cutoffs.begin(), cutoffs.end() - 1);
    return std::make_shared<AdaptiveLogSoftmaxWithLoss>(in_features, n_classes, given, div_value, head_bias);
  });
}

void AdaptiveLogSoftmaxWithLoss::rebind_members(const MemberRemap& remap) {
  remap(head);
  remap(tail);
}

}  // namespace ember::nn
