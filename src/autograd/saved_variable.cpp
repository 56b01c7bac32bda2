#include "autograd/saved_variable.h"

#include "autograd/autograd_meta.h"
#include "core/tensor_impl.h"
#include "ember/errors.h"

namespace ember::autograd {

namespace {
const char* type_name(DType d) {
  switch (d) {
    case kFloat32: return "FloatTensor";
    case kFloat64: return "DoubleTensor";
    case kFloat16: return "HalfTensor";
    case kBFloat16: return "BFloat16Tensor";
    case kComplex64: return "ComplexFloatTensor";
    case kComplex128: return "ComplexDoubleTensor";
    case kInt64: return "LongTensor";
    case kInt32: return "IntTensor";
    case kInt16: return "ShortTensor";
    case kInt8: return "CharTensor";
    case kUInt8: return "ByteTensor";
    case kBool: return "BoolTensor";
  }
  return "Tensor";
}
}  // namespace

std::string type_string(const Tensor& t) {
  return std::string(t.is_cuda() ? "torch.cuda." : "torch.") + type_name(t.dtype());
}

void fail_backward_twice() {
  ember::detail::fail<Error>(
      "Trying to backward through the graph a second time (or directly access saved tensors after they have "
      "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
      "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
      "if you need to access saved tensors after calling backward.");
}

SavedVariable::SavedVariable(const Tensor& t, bool is_output, std::optional<uint32_t> version) : is_output_(is_output) {
  if (!t.defined()) return;
  saved_version_ = version.value_or(t._version());
  if (is_output) {
    if (AutogradMeta* meta = meta_of(t)) output_nr_ = meta->output_nr_;
    data_ = alias_of(t);
  } else if (saved_version_ != t._version()) {
    // Note [Stale saved inputs]
    // An in-place op that read `t` before writing over it (x.mul_(x), v.mul_(v) on a view)
    // saves t at the version it read, so unpack() can only refuse it: versions never go
    // back. Keeping t itself would also keep its history, which now leads back to the node
    // that saves it (x's grad_fn is that node, or a view's rebased grad_fn holds it): a
    // cycle that is never freed. So the value is kept without history (an alias sharing
    // t's version counter), and t only weakly, to name its producer in the error.
    data_ = alias_of(t);
    stale_original_ = t.impl_ptr();
  } else {
    data_ = t;
  }
}

Tensor SavedVariable::unpack(const std::string& node_name) const {
  if (released_) fail_backward_twice();
  if (!data_.defined()) return data_;
  uint32_t now = data_._version();
  if (now != saved_version_) {
    // As PyTorch, name the node that now produces the tensor (an in-place op replaced it).
    std::string which;
    if (is_output_) {
      which = ember::detail::cat(", which is output ", output_nr_, " of ", node_name, ",");
    } else {
      Tensor original(stale_original_.lock());
      if (!original.defined()) original = data_;
      if (AutogradMeta* meta = meta_of(original); meta != nullptr && meta->grad_fn_) {
        which = ember::detail::cat(", which is output ", meta->output_nr_, " of ", meta->grad_fn_->name(), ",");
      }
    }
    ember::detail::fail<Error>(
        "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [",
        type_string(data_), " ", ember::detail::IntListPrinter{data_.sizes()}, "]", which, " is at version ", now,
        "; expected version ", saved_version_, " instead.");
  }
  return data_;
}

}  // namespace ember::autograd
