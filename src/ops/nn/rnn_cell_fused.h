// The fused recurrent cells (PyTorch's _thnn_fused_lstm_cell / _thnn_fused_gru_cell and
// their backward): one launch each, not recorded (src/nn/modules/rnn_layer.cpp makes them a
// custom Function). Contracts in kernels/rnn_cell_kernels.h.
#pragma once

#include <tuple>

#include "ember/tensor.h"

namespace ember::detail {

/// True when the fused kernels take this dtype (float32, float64).
bool rnn_cell_fusable(const Tensor& gates);

/// (hy, cy, workspace) from igates, hgates {B, 4H} and cx {B, H}.
std::tuple<Tensor, Tensor, Tensor> lstm_cell_fused(const Tensor& igates, const Tensor& hgates, const Tensor& cx);
/// (grad of the gates {B, 4H}, grad of cx); an undefined gradient counts as zeros.
std::tuple<Tensor, Tensor> lstm_cell_fused_backward(const Tensor& grad_hy, const Tensor& grad_cy, const Tensor& cx,
                                                    const Tensor& cy, const Tensor& workspace);
/// (hy, workspace) from igates, hgates {B, 3H} and hx {B, H}.
std::tuple<Tensor, Tensor> gru_cell_fused(const Tensor& igates, const Tensor& hgates, const Tensor& hx);
/// (grad of igates, grad of hgates, grad of hx); an undefined gradient counts as zeros.
std::tuple<Tensor, Tensor, Tensor> gru_cell_fused_backward(const Tensor& grad_hy, const Tensor& workspace);

}  // namespace ember::detail
