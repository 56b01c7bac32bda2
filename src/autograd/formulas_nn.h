// Derivative formulas of the training ops (formulas_nn.cpp); the table is in formulas.cpp.
#pragma once

#include "autograd/formula_node.h"

namespace ember::autograd::detail::nn_formulas {

using Grads = std::vector<Tensor>;

Grads cat_backward(const FormulaNode& n, const Grads& g);
Grads split_backward(const FormulaNode& n, const Grads& g);
Grads stack_backward(const FormulaNode& n, const Grads& g);
Grads where_backward(const FormulaNode& n, const Grads& g);
Grads clamp_scalar_backward(const FormulaNode& n, const Grads& g);
Grads clamp_backward(const FormulaNode& n, const Grads& g);
Grads softmax_backward(const FormulaNode& n, const Grads& g);
Grads log_softmax_backward(const FormulaNode& n, const Grads& g);
Grads var_mean_backward(const FormulaNode& n, const Grads& g);
Grads nll_loss_backward(const FormulaNode& n, const Grads& g);
Grads max_pool2d_backward(const FormulaNode& n, const Grads& g);
Grads avg_pool2d_backward(const FormulaNode& n, const Grads& g);
Grads conv2d_backward(const FormulaNode& n, const Grads& g);
Grads fft_backward(const FormulaNode& n, const Grads& g);

}  // namespace ember::autograd::detail::nn_formulas
