// Derivative formulas of the transformer ops (formulas_transformer.cpp); the table is in
// formulas.cpp.
#pragma once

#include "autograd/formula_node.h"

namespace ember::autograd::detail::transformer_formulas {

using Grads = std::vector<Tensor>;

Grads embedding_backward(const FormulaNode& n, const Grads& g);
Grads index_add_backward(const FormulaNode& n, const Grads& g);
Grads layer_norm_backward(const FormulaNode& n, const Grads& g);
Grads gelu_backward(const FormulaNode& n, const Grads& g);
Grads gelu_backward_backward(const FormulaNode& n, const Grads& g);

}  // namespace ember::autograd::detail::transformer_formulas
