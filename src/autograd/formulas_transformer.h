// Derivative formulas of the transformer ops (formulas_transformer.cpp); the table is in
// formulas.cpp.
#pragma once

#include "autograd/formula_node.h"

namespace ember::autograd::detail::transformer_formulas {

using Grads = std::vector<Tensor>;

Grads embedding(const FormulaNode& n, const Grads& g);
Grads index_add(const FormulaNode& n, const Grads& g);
Grads layer_norm(const FormulaNode& n, const Grads& g);
Grads gelu(const FormulaNode& n, const Grads& g);
Grads gelu_backward(const FormulaNode& n, const Grads& g);

}  // namespace ember::autograd::detail::transformer_formulas
