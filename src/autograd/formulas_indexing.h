// Derivative formulas of the scan, statistics, sorting and indexing ops
// (formulas_indexing.cpp); the table is in formulas.cpp.
#pragma once

#include "autograd/formula_node.h"

namespace ember::autograd::detail::indexing_formulas {

using Grads = std::vector<Tensor>;

Grads cumsum_backward(const FormulaNode& n, const Grads& g);
Grads logsumexp_backward(const FormulaNode& n, const Grads& g);
Grads sum_dims_backward(const FormulaNode& n, const Grads& g);
Grads mean_dims_backward(const FormulaNode& n, const Grads& g);
Grads var_backward(const FormulaNode& n, const Grads& g);
Grads std_backward(const FormulaNode& n, const Grads& g);
Grads triu_backward(const FormulaNode& n, const Grads& g);
Grads tril_backward(const FormulaNode& n, const Grads& g);
Grads sort_backward(const FormulaNode& n, const Grads& g);
Grads gather_backward(const FormulaNode& n, const Grads& g);
Grads scatter_add_backward(const FormulaNode& n, const Grads& g);

}  // namespace ember::autograd::detail::indexing_formulas
