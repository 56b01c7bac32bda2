// Derivative formulas of the scan, statistics, sorting and indexing ops
// (formulas_indexing.cpp); the table is in formulas.cpp.
#pragma once

#include "autograd/formula_node.h"

namespace ember::autograd::detail::indexing_formulas {

using Grads = std::vector<Tensor>;

Grads cumsum(const FormulaNode& n, const Grads& g);
Grads logsumexp(const FormulaNode& n, const Grads& g);
Grads var(const FormulaNode& n, const Grads& g);
Grads std(const FormulaNode& n, const Grads& g);
Grads triu(const FormulaNode& n, const Grads& g);
Grads tril(const FormulaNode& n, const Grads& g);
Grads sort(const FormulaNode& n, const Grads& g);
Grads gather(const FormulaNode& n, const Grads& g);
Grads scatter_add(const FormulaNode& n, const Grads& g);

}  // namespace ember::autograd::detail::indexing_formulas
