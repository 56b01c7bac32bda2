// The recording seam: what an op entry point tells autograd. The op layer owns it;
// src/autograd implements it (record.cpp) and installs itself when the library loads.
//
// Note [Recording ops]
// A public op entry point (src/ops) computes its result as always, then, only when
// `should_record(inputs...)` says so (grad mode on and an input requires grad), calls
// `record(formula, inputs, outputs, attrs)`. The installed Recorder makes one node of the
// formula's kind whose next edges lead to the inputs' nodes, saves what the formula names
// and points the outputs' grad_fn at it. In-place entry points go through
// `recorded_inplace`: it refuses a leaf that requires grad (or a view of one), writes,
// bumps the version counter and, when recording, makes self the output of a new node whose
// input is self's previous history; on a view, the base's history is rewritten instead
// (Note [Views and in-place ops] in src/autograd/view_history.h). A view op notes each
// view it makes (`note_view`). A composite op computes under NoGradGuard and records one
// node (`recorded`). Nothing below the op layer sees this, and the op layer sees nothing of
// autograd but this header: the check that decides whether to record is inline here (grad
// mode's flag lives in core), so an op that records nothing pays no call into autograd
// beyond note_view on a view op.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "core/tensor_impl.h"
#include "ember/autograd.h"
#include "ember/scalar.h"
#include "ember/stream.h"
#include "ember/tensor.h"
#include "ops/formulas.h"

namespace ember::detail {

/// What autograd does for the op layer (src/autograd/record.cpp implements it). Each call
/// is made only where its contract says, so none is on the path of an op that records nothing
/// except `note_view`.
class Recorder {
 public:
  /// Records `outputs = op(inputs)` as one node of `formula`. An output that is the same
  /// tensor as an input is replaced by an alias first, so the input keeps its own history;
  /// with `inplace`, output 0 is the input that was modified and takes the new history.
  /// Outputs of integer dtypes are not differentiable and get no history. `read_versions`
  /// (in-place ops): the inputs' versions before the op wrote, which their saved copies keep.
  virtual void record(Formula formula, const std::vector<Tensor>& inputs, std::vector<Tensor*> outputs, Attrs attrs,
                      bool inplace, const std::vector<uint32_t>& read_versions) = 0;
  /// After `view` was made sharing `self`'s storage: `view` remembers self's root base and
  /// whether it was made in no_grad mode (Note [Views and in-place ops]). `multi_output`:
  /// one of several views one op returns (split, chunk), which PyTorch does not let an
  /// in-place op change when it is recorded.
  virtual void note_view(const Tensor& self, const Tensor& view, bool multi_output) = 0;
  /// Before an in-place op `self = op(self, other)`: refuses, while grad mode is on, a leaf
  /// that requires grad or a view of one, and, when the op would be recorded, a change of a
  /// view made in no_grad mode or of a multi-output view, or an `other` whose history can no
  /// longer be made: nothing is written.
  virtual void check_inplace(const Tensor& self, const Tensor& other) = 0;
  /// Records the in-place op `formula` on `self` (already written and its version bumped):
  /// `before` is self's value before the write, `other` the op's other input (or undefined),
  /// `read_versions` the versions of before and other taken before the write.
  virtual void record_inplace(Formula formula, const Tensor& before, const Tensor& other, Tensor& self, Attrs attrs,
                              std::vector<uint32_t> read_versions) = 0;

 protected:
  ~Recorder() = default;
};

/// Installs autograd's recorder (once, when the library loads; it lives as long as the program).
void install_recorder(Recorder* recorder) noexcept;
/// The installed recorder; before one is installed, one that records nothing.
Recorder& recorder() noexcept;

/// True when grad mode is on and any defined input requires grad.
inline bool should_record(std::initializer_list<const Tensor*> inputs) {
  if (!is_grad_enabled()) return false;
  for (const Tensor* t : inputs) {
    if (t->defined() && t->impl()->requires_grad()) return true;
  }
  return false;
}
inline bool should_record(const Tensor& a) { return should_record({&a}); }
inline bool should_record(const Tensor& a, const Tensor& b) { return should_record({&a, &b}); }
inline bool should_record(const std::vector<Tensor>& inputs) {
  if (!is_grad_enabled()) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.impl()->requires_grad()) return true;
  }
  return false;
}

/// Recorder::record, with its defaults.
inline void record(Formula formula, const std::vector<Tensor>& inputs, std::vector<Tensor*> outputs, Attrs attrs = {},
                   bool inplace = false, const std::vector<uint32_t>& read_versions = {}) {
  recorder().record(formula, inputs, std::move(outputs), std::move(attrs), inplace, read_versions);
}
inline void record(Formula formula, const std::vector<Tensor>& inputs, Tensor& out, Attrs attrs = {}) {
  record(formula, inputs, std::vector<Tensor*>{&out}, std::move(attrs));
}
/// Recorder::note_view.
inline void note_view(const Tensor& self, const Tensor& view, bool multi_output = false) {
  recorder().note_view(self, view, multi_output);
}

/// `compute()`, recorded as one node of `formula` over `inputs` when should_record(inputs);
/// `compute` then runs without recording, so the ops it is made of leave no nodes (and a
/// view it returns is not a no_grad view).
template <typename F>
Tensor recorded(Formula formula, std::initializer_list<const Tensor*> inputs, F&& compute, Attrs attrs = {}) {
  if (!should_record(inputs)) return compute();
  Tensor out;
  {
    NoGradGuard no_grad;
    out = compute();
  }
  std::vector<Tensor> in;
  in.reserve(inputs.size());
  for (const Tensor* t : inputs) in.push_back(*t);
  record(formula, in, out, std::move(attrs));
  return out;
}

/// As `recorded`, over a list of inputs (cat).
template <typename F>
Tensor recorded_list(Formula formula, const std::vector<Tensor>& inputs, F&& compute, Attrs attrs = {}) {
  if (!should_record(inputs)) return compute();
  Tensor out;
  {
    NoGradGuard no_grad;
    out = compute();
  }
  record(formula, inputs, out, std::move(attrs));
  return out;
}

/// After an in-place op on `self`: the data changed (saved copies of it are now stale).
inline void bump_version(const Tensor& self) { self.impl()->storage()->bump_version(); }

/// An in-place op `self = op(self, other)` (other may be undefined): runs `write()`
/// without recording, bumps self's version and, when should_record(self, other), records
/// `formula` with self as its output. A formula that saves its inputs sees a copy of self
/// taken before the write, and `other` at the version it had then: an `other` sharing
/// self's storage (x.mul_(x), x.div_(x[0].detach())) is stale once the op wrote, and a
/// backward that would read it raises PyTorch's in-place modification error.
template <typename F>
Tensor& recorded_inplace(Formula formula, Tensor& self, const Tensor& other, F&& write, Attrs attrs = {}) {
  recorder().check_inplace(self, other);
  if (!should_record(self, other)) {
    write();
    bump_version(self);
    return self;
  }
  // The copy keeps self's history: a double backward differentiates through it.
  Tensor before = saves_inputs(formula) ? self.clone() : self;
  std::vector<uint32_t> read_versions{before._version()};
  if (other.defined()) read_versions.push_back(other._version());
  {
    NoGradGuard no_grad;
    write();
  }
  bump_version(self);
  recorder().record_inplace(formula, before, other, self, std::move(attrs), std::move(read_versions));
  return self;
}

}  // namespace ember::detail
