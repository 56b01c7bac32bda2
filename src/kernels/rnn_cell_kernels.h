// Contracts of the fused recurrent cells' KernelCalls (built by src/ops/nn/rnn_cell_fused.cpp;
// run by cpu_rnn_cell.cpp and the driver's cuda_rnn_cell.cu), and their element bodies,
// written once for host and device. PyTorch's _thnn_fused_lstm_cell / _thnn_fused_gru_cell:
// the gate pre-activations in (the input part x W_ih^T + b_ih and the hidden part
// h W_hh^T + b_hh, each one matrix product), the new state out, and a workspace kept for the
// backward. Every operand is contiguous, of one dtype, float32 or float64; element (b, j)
// of a state {B, H} is computed by one thread from the gates of its row.
//
// LstmCell
//   inputs[0] igates {B, 4H}, inputs[1] hgates {B, 4H} (gates i, f, g, o), inputs[2] cx {B, H}
//   outputs[0] hy {B, H}, outputs[1] cy {B, H}, outputs[2] workspace {B, 4H}: the activated
//   gates sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)
//   cy = f cx + i g; hy = o tanh(cy)
// LstmCellBackward
//   inputs[0] grad of hy {B, H}, inputs[1] grad of cy {B, H}, inputs[2] cx, inputs[3] cy,
//   inputs[4] workspace {B, 4H}
//   outputs[0] grad of the gate pre-activations {B, 4H} (the same for igates and hgates),
//   outputs[1] grad of cx {B, H}
// GruCell
//   inputs[0] igates {B, 3H}, inputs[1] hgates {B, 3H} (gates r, z, n), inputs[2] hx {B, H}
//   outputs[0] hy {B, H}, outputs[1] workspace {B, 5H}: r, z, n, hx, and hgates' n part
//   r = sigmoid(i_r + h_r), z = sigmoid(i_z + h_z), n = tanh(i_n + r h_n), hy = n + z (hx - n)
// GruCellBackward
//   inputs[0] grad of hy {B, H}, inputs[1] workspace {B, 5H}
//   outputs[0] grad of igates {B, 3H}, outputs[1] grad of hgates {B, 3H}, outputs[2] grad of hx
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/convert.h"

namespace ember::detail {

// The activations the element bodies call, a template parameter so that a backend can run
// the same bodies with its own vectorisable sigmoid and tanh (the cpu's float rows,
// backends/cpu/cpu_vec_activations.h). These are the std:: functions: float64 on the cpu,
// and every dtype on the driver.
struct CellActivations {
  template <typename T>
  EMBER_HOST_DEVICE static T sigmoid(T x) {
    return T(1) / (T(1) + std::exp(-x));
  }
  template <typename T>
  EMBER_HOST_DEVICE static T tanh(T x) {
    return std::tanh(x);
  }
};

/// Element (b, j) of LstmCell, H hidden units.
template <typename T, typename Act = CellActivations>
EMBER_HOST_DEVICE inline void lstm_cell_element(int64_t b, int64_t j, int64_t H, const T* igates, const T* hgates,
                                                const T* cx, T* hy, T* cy, T* workspace) {
  const int64_t row = b * 4 * H + j, unit = b * H + j;
  const T i = Act::sigmoid(igates[row] + hgates[row]);
  const T f = Act::sigmoid(igates[row + H] + hgates[row + H]);
  const T g = Act::tanh(igates[row + 2 * H] + hgates[row + 2 * H]);
  const T o = Act::sigmoid(igates[row + 3 * H] + hgates[row + 3 * H]);
  const T c = f * cx[unit] + i * g;
  cy[unit] = c;
  hy[unit] = o * Act::tanh(c);
  workspace[row] = i;
  workspace[row + H] = f;
  workspace[row + 2 * H] = g;
  workspace[row + 3 * H] = o;
}

/// Element (b, j) of LstmCellBackward.
template <typename T, typename Act = CellActivations>
EMBER_HOST_DEVICE inline void lstm_cell_backward_element(int64_t b, int64_t j, int64_t H, const T* grad_hy,
                                                         const T* grad_cy, const T* cx, const T* cy, const T* workspace,
                                                         T* grad_gates, T* grad_cx) {
  const int64_t row = b * 4 * H + j, unit = b * H + j;
  const T i = workspace[row], f = workspace[row + H], g = workspace[row + 2 * H], o = workspace[row + 3 * H];
  const T tanh_c = Act::tanh(cy[unit]);
  const T gc = grad_hy[unit] * o * (T(1) - tanh_c * tanh_c) + grad_cy[unit];
  grad_gates[row] = gc * g * i * (T(1) - i);
  grad_gates[row + H] = gc * cx[unit] * f * (T(1) - f);
  grad_gates[row + 2 * H] = gc * i * (T(1) - g * g);
  grad_gates[row + 3 * H] = grad_hy[unit] * tanh_c * o * (T(1) - o);
  grad_cx[unit] = gc * f;
}

/// Element (b, j) of GruCell.
template <typename T, typename Act = CellActivations>
EMBER_HOST_DEVICE inline void gru_cell_element(int64_t b, int64_t j, int64_t H, const T* igates, const T* hgates,
                                               const T* hx, T* hy, T* workspace) {
  const int64_t row = b * 3 * H + j, unit = b * H + j, saved = b * 5 * H + j;
  const T r = Act::sigmoid(igates[row] + hgates[row]);
  const T z = Act::sigmoid(igates[row + H] + hgates[row + H]);
  const T h_n = hgates[row + 2 * H];
  const T n = Act::tanh(igates[row + 2 * H] + r * h_n);
  const T h = hx[unit];
  hy[unit] = n + z * (h - n);
  workspace[saved] = r;
  workspace[saved + H] = z;
  workspace[saved + 2 * H] = n;
  workspace[saved + 3 * H] = h;
  workspace[saved + 4 * H] = h_n;
}

/// Element (b, j) of GruCellBackward.
template <typename T>
EMBER_HOST_DEVICE inline void gru_cell_backward_element(int64_t b, int64_t j, int64_t H, const T* grad_hy,
                                                        const T* workspace, T* grad_igates, T* grad_hgates,
                                                        T* grad_hx) {
  const int64_t row = b * 3 * H + j, unit = b * H + j, saved = b * 5 * H + j;
  const T r = workspace[saved], z = workspace[saved + H], n = workspace[saved + 2 * H];
  const T h = workspace[saved + 3 * H], h_n = workspace[saved + 4 * H];
  const T g = grad_hy[unit];
  const T grad_n = g * (T(1) - z) * (T(1) - n * n);
  const T grad_z = g * (h - n) * z * (T(1) - z);
  const T grad_r = grad_n * h_n * r * (T(1) - r);
  grad_igates[row] = grad_r;
  grad_igates[row + H] = grad_z;
  grad_igates[row + 2 * H] = grad_n;
  grad_hgates[row] = grad_r;
  grad_hgates[row + H] = grad_z;
  grad_hgates[row + 2 * H] = grad_n * r;
  grad_hx[unit] = g * z;
}

}  // namespace ember::detail
