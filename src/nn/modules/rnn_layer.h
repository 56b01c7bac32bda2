// The recurrence of one layer and direction, and the cell math the modules and the cells
// share. Internal to src/nn/modules/rnn*.cpp.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ember/tensor.h"

namespace ember::detail::nn {

/// x W^T + b (b may be undefined): one matrix product over every row of x. On a cuda
/// float32 x the product (and its backward) rounds to TF32 exactly when `tf32` says so,
/// whatever backends::cuda::matmul.allow_tf32 says (Note [Recurrent TF32]); elsewhere it
/// is addmm/matmul.
enum class Tf32 { kMatmulFlag, kCudnnFlag };
Tensor project(const Tensor& x, const Tensor& weight, const Tensor& bias, Tf32 tf32 = Tf32::kMatmulFlag);

/// The gate math of one step, from the input part igates = x W_ih^T + b_ih and the hidden
/// part hgates = h W_hh^T + b_hh of the pre-activations (PyTorch's gate orders).
Tensor rnn_cell_step(const Tensor& igates, const Tensor& hgates, bool relu);
std::pair<Tensor, Tensor> lstm_cell_step(const Tensor& igates, const Tensor& hgates, const Tensor& c);
Tensor gru_cell_step(const Tensor& igates, const Tensor& hgates, const Tensor& h);

/// One layer and direction over packed rows. `input_gates` [sum(batch_sizes), G] is the
/// input projection of every row; step t owns batch_sizes[t] rows (non-increasing in t).
/// h0 [batch_sizes[0], H_out] (and c0 for the LSTM) are the initial states. `weights` are
/// w_ih, w_hh, b_ih, b_hh (with bias), w_hr (with a projection); `has_bias`/`has_proj` say
/// which. Returns the output rows [sum(batch_sizes), H_out] in the input's order and the final
/// state of every sequence (h, and c for the LSTM).
struct LayerResult {
  Tensor output;
  Tensor h_n, c_n;
};
LayerResult run_layer(const std::string& mode, const Tensor& input_gates, const std::vector<int64_t>& batch_sizes,
                      const Tensor& h0, const Tensor& c0, const Tensor& w_hh, const Tensor& b_hh, const Tensor& w_hr,
                      bool reverse, Tf32 tf32);

}  // namespace ember::detail::nn
