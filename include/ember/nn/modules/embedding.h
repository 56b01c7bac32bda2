// nn::Embedding (torch.nn.Embedding).
#pragma once

#include <optional>

#include "ember/nn/module.h"

namespace ember::nn {

/// A lookup table: int64 indices of any shape -> [..., embedding_dim] rows of weight
/// [num_embeddings, embedding_dim], which starts N(0, 1) as PyTorch's. With padding_idx
/// (negative counts from the end), that row starts zero and receives no gradient.
class Embedding : public Module {
 public:
  /// As PyTorch's: zero rows or columns are accepted; a negative size is a ValueError
  /// ("Trying to create tensor with negative dimension"), and so is a padding_idx out of
  /// range ("Padding_idx must be within num_embeddings").
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt);
  /// An index outside [0, num_embeddings) is an IndexError "index out of range in self" on
  /// the cpu (PyTorch's); on a cuda device, a device-side assertion reported asynchronously.
  Tensor forward(const Tensor& indices) override;
  std::shared_ptr<Module> clone() const override;
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;  // normalized to [0, num_embeddings)
  Tensor weight;

 protected:
  void rebind_members(const MemberRemap& remap) override;
};

}  // namespace ember::nn
