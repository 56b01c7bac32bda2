// Deep copies of modules (Note [Deep copies] in nn/copy_module.h).
#include "nn/copy_module.h"

#include <typeinfo>
#include <unordered_map>
#include <unordered_set>

#include "core/tensor_impl.h"
#include "ember/errors.h"

namespace ember::nn {

void MemberRemap::operator()(Tensor& member) const {
  if (!member.defined()) return;
  for (const auto& [replaced, replacement] : tensors_) {
    if (replaced == member.impl()) {
      member = replacement;
      return;
    }
  }
}

std::shared_ptr<Module> MemberRemap::replacement(const Module* member) const {
  for (const auto& [replaced, replacement] : modules_) {
    if (replaced == member) return replacement;
  }
  return nullptr;
}

}  // namespace ember::nn

namespace ember::detail::nn {
namespace {

thread_local int clone_depth = 0;

// (References, not dereferenced pointers, inside typeid: clang warns of the latter.)
bool same_class(const ember::nn::Module& a, const ember::nn::Module& b) { return typeid(a) == typeid(b); }

}  // namespace

CloneScope::CloneScope() {
  if (clone_depth++ == 0) fork_ = std::make_unique<ForkRng>();
}

CloneScope::~CloneScope() { --clone_depth; }

bool clone_in_progress() noexcept { return clone_depth > 0; }

using ember::nn::MemberRemap;
using ember::nn::Module;
using ember::nn::OrderedDict;

// Steps 2 and 3 of Note [Deep copies], with the memo of what was copied so far.
class DeepCopy {
 public:
  void copy(const Module& from, Module& to) {
    copies_.push_back(&to);
    if (auto self = to.weak_from_this().lock()) modules_.emplace(&from, std::move(self));  // a cycle back to it
    to.training_ = from.training_;
    to.non_persistent_ = from.non_persistent_;
    to.parameters_ = mirror(from.parameters_, to.parameters_);
    to.buffers_ = mirror(from.buffers_, to.buffers_);
    OrderedDict<std::shared_ptr<Module>> children;
    for (const auto& [name, child] : from.children_) {
      const std::shared_ptr<Module>* slot = to.children_.find(name);
      const std::shared_ptr<Module> old = slot ? *slot : nullptr;
      std::shared_ptr<Module> mine;
      if (auto seen = modules_.find(child.get()); seen != modules_.end()) {
        mine = seen->second;  // shared in the original: shared in the copy
      } else {
        // The constructor's child of that name, unless the original registered it (or
        // another class under its name) after construction: then a clone of its own.
        const bool built = old != nullptr && same_class(*old, *child);
        mine = built ? old : child->clone();
        modules_.emplace(child.get(), mine);
        copy(*child, *mine);
      }
      if (old != nullptr && old != mine) remap_.modules_.emplace_back(old.get(), mine);
      children.insert(name, mine);
    }
    to.children_ = std::move(children);
  }

  void rebind_members() {
    for (Module* m : copies_) m->rebind_members(remap_);
  }

 private:
  // The copy's registry for `original`'s entries, in their order: the copy's own tensor of
  // the same name takes the cloned value the first time an original tensor is met; a tensor
  // met again is the copy made the first time.
  OrderedDict<Tensor> mirror(const OrderedDict<Tensor>& original, const OrderedDict<Tensor>& built) {
    OrderedDict<Tensor> out;
    for (const auto& [name, source] : original) {
      const Tensor* slot = built.find(name);
      const Tensor old = slot ? *slot : Tensor();
      Tensor result;
      if (source.defined()) {
        if (auto seen = tensors_.find(source.impl()); seen != tensors_.end()) {
          result = seen->second;
        } else {
          const Tensor value = source.clone();
          if (old.defined() && claimed_.insert(old.impl()).second) {
            result = old;
            result.impl()->set_data(*value.impl());
          } else {
            result = value;
            claimed_.insert(result.impl());
          }
          if (result.requires_grad() != source.requires_grad()) result.requires_grad_(source.requires_grad());
          tensors_.emplace(source.impl(), result);
        }
      }
      if (old.defined() && !(result.defined() && result.is_same(old))) remap_.tensors_.emplace_back(old.impl(), result);
      out.insert(name, result);
    }
    return out;
  }

  std::unordered_map<const TensorImpl*, Tensor> tensors_;               // original -> its copy
  std::unordered_set<const TensorImpl*> claimed_;                       // the copy's tensors in use
  std::unordered_map<const Module*, std::shared_ptr<Module>> modules_;  // original -> its copy
  std::vector<Module*> copies_;
  MemberRemap remap_;
};

void copy_module_state(const Module& from, Module& to) {
  CloneScope scope;  // children cloned here (registered after construction) leave the state to us
  NoGradGuard no_grad;
  DeepCopy deep_copy;
  deep_copy.copy(from, to);
  deep_copy.rebind_members();
}

}  // namespace ember::detail::nn
