// Derivative formulas of the training ops (formulas_nn.cpp); the table is in formulas.cpp.
#pragma once

#include "autograd/formula_node.h"

namespace ember::autograd::detail::nn_formulas {

using Grads = std::vector<Tensor>;

Grads cat(const FormulaNode& n, const Grads& g);
Grads split(const FormulaNode& n, const Grads& g);
Grads stack(const FormulaNode& n, const Grads& g);
Grads where(const FormulaNode& n, const Grads& g);
Grads clamp_scalar(const FormulaNode& n, const Grads& g);
Grads clamp(const FormulaNode& n, const Grads& g);
Grads softmax(const FormulaNode& n, const Grads& g);
Grads log_softmax(const FormulaNode& n, const Grads& g);
Grads var_mean(const FormulaNode& n, const Grads& g);
Grads nll_loss(const FormulaNode& n, const Grads& g);
Grads max_pool2d(const FormulaNode& n, const Grads& g);
Grads avg_pool2d(const FormulaNode& n, const Grads& g);
Grads conv2d(const FormulaNode& n, const Grads& g);
Grads fft(const FormulaNode& n, const Grads& g);

}  // namespace ember::autograd::detail::nn_formulas
