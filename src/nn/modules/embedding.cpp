#include "ember/nn/modules/embedding.h"

#include "ember/autograd.h"
#include "ember/factories.h"
#include "ember/nn.h"
#include "ember/nn/init.h"
#include "nn/copy_module.h"
#include "nn/module_context.h"

namespace ember::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx)
    : num_embeddings(num_embeddings), embedding_dim(embedding_dim) {
  if (padding_idx) {
    EMBER_CHECK(*padding_idx < num_embeddings && *padding_idx >= -num_embeddings, ValueError,
                "Padding_idx must be within num_embeddings");
    this->padding_idx = *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
  }
  // Sizes as PyTorch's: zero is fine, a negative one is refused by empty() with its message.
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  reset_parameters();
}

void Embedding::reset_parameters() {
  init::normal_(weight);
  if (padding_idx) {
    NoGradGuard no_grad;
    weight.select(0, *padding_idx).fill_(0);
  }
}

Tensor Embedding::forward(const Tensor& indices) {
  return detail::nn::with_module_context(*this, [&] { return functional::embedding(indices, weight, padding_idx); });
}

std::shared_ptr<Module> Embedding::clone() const {
  return detail::nn::clone_as(*this,
                              [&] { return std::make_shared<Embedding>(num_embeddings, embedding_dim, padding_idx); });
}

std::string Embedding::extra_repr() const {
  std::string out = detail::cat(num_embeddings, ", ", embedding_dim);
  if (padding_idx) out += detail::cat(", padding_idx=", *padding_idx);
  return out;
}

void Embedding::rebind_members(const MemberRemap& remap) { remap(weight); }

}  // namespace ember::nn
