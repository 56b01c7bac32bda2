// FormulaNode: the node of a built-in op, running the op's derivative formula.
#pragma once

#include <vector>

#include "autograd/node.h"
#include "autograd/saved_variable.h"
#include "ops/recording.h"

namespace ember::autograd::detail {

using ember::detail::Attrs;
using ember::detail::Formula;
// The formulas' argument types (ops/formula_args.h).
using ember::detail::AddmmArgs;
using ember::detail::AlphaArgs;
using ember::detail::AsStridedArgs;
using ember::detail::AvgPoolArgs;
using ember::detail::CatArgs;
using ember::detail::ClampArgs;
using ember::detail::CopyArgs;
using ember::detail::DimArgs;
using ember::detail::FftArgs;
using ember::detail::NllLossArgs;
using ember::detail::NoArgs;
using ember::detail::PermuteArgs;
using ember::detail::ReduceDimArgs;
using ember::detail::ScalarArgs;
using ember::detail::SelectArgs;
using ember::detail::SliceArgs;
using ember::detail::TransposeArgs;
using ember::detail::WindowArgs;

/// What a formula knows of each forward input besides the saved tensors.
struct InputInfo {
  IntList sizes;
  IntList strides;
  int64_t offset = 0;
  DType dtype = kFloat32;
  Device device{kCPU};
};

class FormulaNode;

/// A formula: the gradients of the forward inputs, given the gradients of its outputs.
/// It may name the saved inputs/outputs it declared, args<A>() and info(i); it returns one
/// tensor per input (undefined where needs_grad(i) is false or the gradient is zero), in
/// the output's shape where the op broadcast: the engine sums it down to the input's shape
/// and casts it to the input's dtype (Note [Gradient validation] in engine.cpp).
using BackwardFormula = std::vector<Tensor> (*)(const FormulaNode& node, const std::vector<Tensor>& grads);

/// A row of the backward table (formulas.cpp); the formula's name and save rule are its
/// declaration's (src/ops/formulas.h).
struct FormulaSpec {
  Formula formula;
  BackwardFormula backward;
};

/// The backward of `formula` (formulas.cpp).
BackwardFormula backward_of(Formula formula);

class FormulaNode final : public Node {
 public:
  FormulaNode(Formula formula, std::vector<Edge> edges, Attrs attrs);

  std::string name() const override {
    return attrs_.name != nullptr ? attrs_.name : ember::detail::formula_decl(formula_).name;
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void release_variables() override;

  /// Saved input `i`, checked against in-place changes.
  Tensor input(size_t i) const { return saved_inputs_.at(i).unpack(name()); }
  /// Saved output `i`, checked against in-place changes.
  Tensor output(size_t i = 0) const { return saved_outputs_.at(i).unpack(name()); }
  /// The op's non-tensor arguments, of the type its formula's row names (ops/formulas.h).
  template <typename A>
  const A& args() const {
    return std::get<A>(attrs_.args);
  }
  const InputInfo& info(size_t i) const { return infos_.at(i); }
  bool needs_grad(size_t i) const { return next_edges()[i].is_valid(); }

  /// Saves what the formula names. `read_versions`, when given, are the versions the op
  /// read its inputs at (an in-place op saves them as they were before it wrote).
  void save(const std::vector<Tensor>& inputs, const std::vector<Tensor*>& outputs,
            const std::vector<uint32_t>& read_versions = {});

 private:
  Formula formula_;
  BackwardFormula backward_;
  Attrs attrs_;
  std::vector<InputInfo> infos_;
  std::vector<SavedVariable> saved_inputs_;
  std::vector<SavedVariable> saved_outputs_;
};

// ---- helpers for formulas ------------------------------------------------------------
/// conj(t) for complex tensors, t itself otherwise.
Tensor conj(const Tensor& t);
/// The real part of a complex tensor, t itself otherwise.
Tensor real(const Tensor& t);
/// `g` summed over broadcast dims down to `shape`.
Tensor sum_to(const Tensor& g, const IntList& shape);

}  // namespace ember::autograd::detail
