// SavedVariable: a tensor a node keeps for its backward, checked against in-place changes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ember/tensor.h"

namespace ember::autograd {

/// Saves an input (as it is, so double backward can differentiate through it) or an
/// output (as an alias without metadata, so the node does not keep itself alive).
/// unpack() throws PyTorch's errors when the data changed in place since it was saved
/// or when the graph was freed by a backward pass without retain_graph.
class SavedVariable {
 public:
  SavedVariable() = default;
  /// `version`: the version the op read `t` at, when the op has written since (an
  /// in-place op whose input shares self's storage); t's current version otherwise.
  SavedVariable(const Tensor& t, bool is_output, std::optional<uint32_t> version = std::nullopt);

  Tensor unpack(const std::string& node_name) const;
  void reset() {
    data_ = Tensor();
    released_ = true;
  }
  bool defined() const noexcept { return data_.defined() || released_; }

 private:
  Tensor data_;
  // Set instead of keeping `data_`'s history when the op wrote over what it read (Note
  // [Stale saved inputs]): the tensor itself, not kept alive, to name its grad_fn.
  std::weak_ptr<ember::detail::TensorImpl> stale_original_;
  uint32_t saved_version_ = 0;
  uint32_t output_nr_ = 0;
  bool is_output_ = false;
  bool released_ = false;
};

/// PyTorch's error for a backward through a graph whose saved values were freed.
[[noreturn]] void fail_backward_twice();

/// PyTorch's name of a tensor type in messages: "torch.FloatTensor", "torch.cuda.DoubleTensor".
std::string type_string(const Tensor& t);

}  // namespace ember::autograd
