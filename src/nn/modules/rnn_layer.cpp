// The recurrence of one layer and direction over packed rows (Note [Packed recurrence]).
#include "nn/modules/rnn_layer.h"

#include <algorithm>

#include "ember/autograd.h"
#include "ember/errors.h"
#include "ember/ops.h"
#include "ops/launch.h"
#include "ops/matmul_precision.h"
#include "runtime/backend_flags.h"

namespace ember::detail::nn {

// Note [Packed recurrence]
// Every input is seen as packed rows: a padded batch [T, B, *] is T steps of B rows each.
// Step t owns batch_sizes[t] rows, the first of the previous step's (sequences are sorted by
// decreasing length), so the forward direction drops the rows of the sequences that ended
// (their state is final) and the reverse direction, which starts each sequence at its own
// last step, adds the rows of the sequences that start there, from h0. No step computes a
// padded row. The input projection of all rows is one matrix product made by the caller.

// Note [Recurrent TF32]
// The contract: on cuda devices RNN, LSTM and GRU follow backends::cudnn.allow_tf32 (PyTorch
// runs them through cuDNN, whose descriptor takes that flag), the cells follow
// backends::cuda::matmul.allow_tf32 (PyTorch's cells are at::linear). matmul reads the matmul
// flag, so the modules' products go through TF32Matmul, a custom Function over the op layer's
// matmul_2d_with_tf32 (ops/matmul_precision.h) with the decision taken once, at the forward,
// and its backward products made with the same decision. Host kernels (cpu, emulated) honour KernelCall::allow_tf32 by
// rounding as TF32 would; a cpu tensor never asks for it.
namespace {

struct TF32Matmul : autograd::Function<TF32Matmul> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& a, const Tensor& b, bool allow_tf32) {
    ctx->save_for_backward({a, b});
    ctx->saved_data["allow_tf32"] = allow_tf32;
    return product(a, b, allow_tf32);
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
    const std::vector<Tensor> saved = ctx->get_saved_variables();
    const bool allow_tf32 = std::any_cast<bool>(ctx->saved_data["allow_tf32"]);
    Tensor grad_a, grad_b;
    if (ctx->needs_input_grad(0)) grad_a = apply(grads[0], saved[1].t(), allow_tf32);
    if (ctx->needs_input_grad(1)) grad_b = apply(saved[0].t(), grads[0], allow_tf32);
    return {grad_a, grad_b, Tensor()};
  }
  static Tensor product(const Tensor& a, const Tensor& b, bool allow_tf32) {
    return detail::matmul_2d_with_tf32(a, b, allow_tf32);
  }
};

}  // namespace

Tensor project(const Tensor& x, const Tensor& weight, const Tensor& bias, Tf32 tf32) {
  if (tf32 == Tf32::kCudnnFlag && x.is_cuda() && x.dtype() == kFloat32) {
    check_same_device(x, weight);
    EMBER_CHECK(weight.dtype() == x.dtype(), ValueError, "mat1 and mat2 must have the same dtype");
    Tensor out = TF32Matmul::apply(x, weight.t(), cudnn_allows_tf32());
    return bias.defined() ? out + bias : out;
  }
  return bias.defined() ? addmm(bias, x, weight.t()) : matmul(x, weight.t());
}

Tensor rnn_cell_step(const Tensor& igates, const Tensor& hgates, bool relu) {
  Tensor pre = igates + hgates;
  return relu ? ember::relu(pre) : ember::tanh(pre);
}

std::pair<Tensor, Tensor> lstm_cell_step(const Tensor& igates, const Tensor& hgates, const Tensor& c) {
  std::vector<Tensor> gates = (igates + hgates).chunk(4, 1);  // i, f, g, o
  Tensor c_next = sigmoid(gates[1]) * c + sigmoid(gates[0]) * ember::tanh(gates[2]);
  Tensor h_next = sigmoid(gates[3]) * ember::tanh(c_next);
  return {h_next, c_next};
}

Tensor gru_cell_step(const Tensor& igates, const Tensor& hgates, const Tensor& h) {
  std::vector<Tensor> i = igates.chunk(3, 1), g = hgates.chunk(3, 1);  // r, z, n
  Tensor r = sigmoid(i[0] + g[0]);
  Tensor z = sigmoid(i[1] + g[1]);
  Tensor n = ember::tanh(i[2] + r * g[2]);  // b_hn is inside the reset product, as PyTorch's
  return (h - n) * z + n;
}

namespace {
Tensor cat_rows(const std::vector<Tensor>& rows) { return rows.size() == 1 ? rows[0] : ember::cat(rows, 0); }
}  // namespace

LayerResult run_layer(const std::string& mode, const Tensor& input_gates, const std::vector<int64_t>& batch_sizes,
                      const Tensor& h0, const Tensor& c0, const Tensor& w_hh, const Tensor& b_hh,
                      const Tensor& w_hr, bool reverse, Tf32 tf32) {
  const auto steps = static_cast<int64_t>(batch_sizes.size());
  const bool lstm = mode == "LSTM";
  // One split for all steps: its backward is one cat of the steps' gradients, where a
  // narrow per step would add T zero-padded copies of the whole projection's gradient.
  const std::vector<Tensor> step_gates = input_gates.split(IntList(batch_sizes.begin(), batch_sizes.end()), 0);

  std::vector<Tensor> outputs(batch_sizes.size());
  Tensor h = h0, c = c0;
  auto step = [&](int64_t t) {
    const Tensor& igates = step_gates[static_cast<size_t>(t)];
    Tensor hgates = project(h, w_hh, b_hh, tf32);
    if (lstm) {
      auto [h_next, c_next] = lstm_cell_step(igates, hgates, c);
      h = w_hr.defined() ? project(h_next, w_hr, Tensor(), tf32) : h_next;
      c = c_next;
    } else if (mode == "GRU") {
      h = gru_cell_step(igates, hgates, h);
    } else {
      h = rnn_cell_step(igates, hgates, mode == "RNN_RELU");
    }
    outputs[t] = h;
  };

  LayerResult result;
  if (!reverse) {
    std::vector<Tensor> final_h, final_c;  // rows of ended sequences, last rows first
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t live = batch_sizes[t];
      if (h.size(0) > live) {
        final_h.push_back(h.narrow(0, live, h.size(0) - live));
        h = h.narrow(0, 0, live);
        if (lstm) {
          final_c.push_back(c.narrow(0, live, c.size(0) - live));
          c = c.narrow(0, 0, live);
        }
      }
      step(t);
    }
    final_h.push_back(h);
    std::reverse(final_h.begin(), final_h.end());
    result.h_n = cat_rows(final_h);
    if (lstm) {
      final_c.push_back(c);
      std::reverse(final_c.begin(), final_c.end());
      result.c_n = cat_rows(final_c);
    }
  } else {
    const int64_t first = batch_sizes[steps - 1];
    h = h0.size(0) > first ? h0.narrow(0, 0, first) : h0;
    if (lstm) c = c0.size(0) > first ? c0.narrow(0, 0, first) : c0;
    for (int64_t t = steps - 1; t >= 0; --t) {
      const int64_t live = batch_sizes[t], have = h.size(0);
      if (live > have) {
        h = ember::cat({h, h0.narrow(0, have, live - have)}, 0);
        if (lstm) c = ember::cat({c, c0.narrow(0, have, live - have)}, 0);
      }
      step(t);
    }
    result.h_n = h;
    result.c_n = c;
  }
  result.output = cat_rows(outputs);
  return result;
}

}  // namespace ember::detail::nn
