// nn::AdaptiveLogSoftmaxWithLoss: the efficient softmax approximation of Grave et al. (torch.nn's).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ember/nn/module.h"
#include "ember/nn/modules/container.h"
#include "ember/nn/modules/linear.h"

namespace ember::nn {

/// What AdaptiveLogSoftmaxWithLoss::forward returns (PyTorch's namedtuple _ASMoutput,
/// LibTorch's ASMoutput): the log-probability of each target and the mean negative one.
struct ASMoutput {
  Tensor output;  // (N), or () for an unbatched input
  Tensor loss;    // ()
};

/// torch.nn.AdaptiveLogSoftmaxWithLoss. Classes [0, cutoffs[0]) form the shortlist, scored by
/// the head together with one logit per cluster; cluster i holds classes
/// [cutoffs[i], cutoffs[i+1]) (the last ends at n_classes) and is scored by tail[i], a
/// Sequential of Linear(in_features, hsz_i, bias=False) and Linear(hsz_i, cluster size,
/// bias=False) with hsz_i = in_features // div_value^(i+1). The parameters are named as
/// PyTorch's: head.weight (head.bias with head_bias), tail.0.0.weight, tail.0.1.weight, ...
/// Every projection is a Linear, so float32 ones on cuda devices follow
/// backends::cuda::matmul.allow_tf32 (never on the cpu).
class AdaptiveLogSoftmaxWithLoss : public Module {
 public:
  /// cutoffs: unique, increasing, each in [1, n_classes - 1], else ValueError with PyTorch's
  /// message ("cutoffs should be a sequence of unique, positive integers sorted in an
  /// increasing order, where each value is between 1 and n_classes-1").
  AdaptiveLogSoftmaxWithLoss(int64_t in_features, int64_t n_classes, const std::vector<int64_t>& cutoffs,
                             double div_value = 4.0, bool head_bias = false);

  /// input (N, in_features) with int64 target (N), or input (in_features) with target ().
  /// output[i] is log p(target[i] | input[i]) and loss is mean(-output). Shape mismatches and
  /// targets outside [0, n_classes - 1] are ValueErrors with PyTorch's messages. Reads the
  /// targets on the host (synchronizing on a cuda device), as PyTorch's nonzero() does.
  ASMoutput forward(const Tensor& input, const Tensor& target);
  ASMoutput operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
  /// Log-probabilities of all classes: input (N, in_features) -> (N, n_classes).
  Tensor log_prob(const Tensor& input);
  /// log_prob(input).argmax(1) (int64, (N)); rows whose head prefers a shortlist class skip
  /// the tails, and when every row does no tail runs at all (PyTorch's shortcut).
  Tensor predict(const Tensor& input);

  std::shared_ptr<Module> clone() const override;
  /// Re-draws the head's and every tail projection's parameters as Linear's initialisation.
  void reset_parameters();

  int64_t in_features, n_classes;
  /// The cutoffs given, followed by n_classes (as PyTorch's self.cutoffs).
  std::vector<int64_t> cutoffs;
  double div_value;
  bool head_bias;
  int64_t shortlist_size, n_clusters, head_size;
  std::shared_ptr<Linear> head;
  std::shared_ptr<ModuleList> tail;

 protected:
  void rebind_members(const MemberRemap& remap) override;

 private:
  /// log_prob of the rows `input` given their head logits.
  Tensor full_log_prob(const Tensor& input, const Tensor& head_output);
};

}  // namespace ember::nn
