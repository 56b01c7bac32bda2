#include "nn/copy_module.h"

#include "core/tensor_impl.h"
#include "ember/autograd.h"
#include "ember/errors.h"

namespace ember::detail::nn {

void copy_module_state(const ember::nn::Module& from, ember::nn::Module& to) {
  NoGradGuard no_grad;
  auto copy = [](const ember::nn::OrderedDict<Tensor>& source, const ember::nn::OrderedDict<Tensor>& target) {
    EMBER_ASSERT(source.keys() == target.keys());
    for (size_t i = 0; i < source.size(); ++i) {
      const Tensor& s = source.item(i).second;
      const Tensor& t = target.item(i).second;
      t.impl()->set_data(*s.clone().impl());
      if (s.requires_grad() != t.requires_grad()) const_cast<Tensor&>(t).requires_grad_(s.requires_grad());
    }
  };
  copy(from.named_parameters(), to.named_parameters());
  copy(from.named_buffers(), to.named_buffers());
  const auto originals = from.modules();
  const auto copies = to.modules();
  EMBER_ASSERT(originals.size() == copies.size());
  for (size_t i = 0; i < originals.size(); ++i) {
    if (copies[i]->is_training() != originals[i]->is_training()) copies[i]->train(originals[i]->is_training());
  }
}

}  // namespace ember::detail::nn
