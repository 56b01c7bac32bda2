// The recurrence of one layer and direction over packed rows (Note [Packed recurrence]).
#include "nn/modules/rnn_layer.h"

#include <algorithm>
#include <any>
#include <memory>
#include <mutex>
#include <utility>

#include "ember/autograd.h"
#include "ember/errors.h"
#include "ember/factories.h"
#include "ember/ops.h"
#include "ops/launch.h"
#include "ops/matmul_precision.h"
#include "ops/nn/rnn_cell_fused.h"
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
// The contract: on cuda devices RNN, LSTM and GRU follow backends::cudnn.rnn.fp32_precision,
// which backends::cudnn.allow_tf32 writes (PyTorch runs them through cuDNN, whose descriptor
// takes it), the cells follow backends::cuda::matmul.fp32_precision (allow_tf32; PyTorch's cells
// are at::linear). matmul reads the matmul setting, so the modules' products go through
// TF32Matmul, a custom Function over the op layer's matmul_2d_with_tf32 (ops/matmul_precision.h)
// with the decision taken once, at the forward, and its backward products made with the same
// decision. Host kernels (cpu, emulated) honour kargs::Matmul::allow_tf32 by rounding as TF32
// would; a cpu tensor never asks for it.
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
    Tensor out = TF32Matmul::apply(x, weight.t(), cudnn_rnn_allows_tf32());
    return bias.defined() ? out + bias : out;
  }
  return bias.defined() ? addmm(bias, x, weight.t()) : matmul(x, weight.t());
}

Tensor rnn_cell_step(const Tensor& igates, const Tensor& hgates, bool relu) {
  Tensor pre = igates + hgates;
  return relu ? ember::relu(pre) : ember::tanh(pre);
}

// Note [Fused cells]
// The LSTM and GRU gate math of a step is one kernel (PyTorch's _thnn_fused_lstm_cell and
// _thnn_fused_gru_cell, ops/nn/rnn_cell_fused.h) and its backward one more, joined by these
// custom Functions: gates in, new state out, the activated gates kept for the backward.
// As PyTorch's derivatives.yaml does, a backward that is itself recorded (create_graph, so
// grad mode is on inside it) is composed of element-wise ops instead of the fused backward
// kernel (_thnn_differentiable_lstm_cell_backward and ..._gru_...), so second derivatives
// through a recurrent step hold. Dtypes the kernels do not take (float16, bfloat16) compose
// the forward from element-wise ops too.
namespace {

Tensor or_zeros(const Tensor& grad, const Tensor& like) { return grad.defined() ? grad : zeros_like(like); }

struct FusedLstmCell : autograd::Function<FusedLstmCell> {
  static std::vector<Tensor> forward(autograd::AutogradContext* ctx, const Tensor& igates, const Tensor& hgates,
                                     const Tensor& cx) {
    auto [hy, cy, workspace] = lstm_cell_fused(igates, hgates, cx);
    ctx->save_for_backward({cx, cy.detach(), workspace, igates, hgates});
    return {hy, cy};
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
    const std::vector<Tensor> saved = ctx->get_saved_variables();
    if (is_grad_enabled()) return differentiable_backward(grads, saved[3], saved[4], saved[0]);
    auto [grad_gates, grad_cx] = lstm_cell_fused_backward(grads[0], grads[1], saved[0], saved[1], saved[2]);
    return {grad_gates, grad_gates, grad_cx};
  }
  // The gate math again, from the saved inputs, as ops that record their own graph.
  static std::vector<Tensor> differentiable_backward(const std::vector<Tensor>& grads, const Tensor& igates,
                                                     const Tensor& hgates, const Tensor& cx) {
    std::vector<Tensor> gates = (igates + hgates).chunk(4, 1);  // i, f, g, o
    Tensor i = sigmoid(gates[0]), f = sigmoid(gates[1]), g = ember::tanh(gates[2]), o = sigmoid(gates[3]);
    Tensor tanh_c = ember::tanh(f * cx + i * g);
    Tensor grad_hy = or_zeros(grads[0], cx), grad_cy = or_zeros(grads[1], cx);
    Tensor grad_c = grad_hy * o * (1.0 - tanh_c * tanh_c) + grad_cy;
    Tensor grad_gates = ember::cat({grad_c * g * i * (1.0 - i), grad_c * cx * f * (1.0 - f), grad_c * i * (1.0 - g * g),
                                    grad_hy * tanh_c * o * (1.0 - o)},
                                   1);
    return {grad_gates, grad_gates, grad_c * f};
  }
};

struct FusedGruCell : autograd::Function<FusedGruCell> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& igates, const Tensor& hgates, const Tensor& hx) {
    auto [hy, workspace] = gru_cell_fused(igates, hgates, hx);
    ctx->save_for_backward({workspace, igates, hgates, hx});
    return hy;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
    const std::vector<Tensor> saved = ctx->get_saved_variables();
    if (is_grad_enabled()) return differentiable_backward(grads[0], saved[1], saved[2], saved[3]);
    auto [grad_igates, grad_hgates, grad_hx] = gru_cell_fused_backward(grads[0], saved[0]);
    return {grad_igates, grad_hgates, grad_hx};
  }
  static std::vector<Tensor> differentiable_backward(const Tensor& grad, const Tensor& igates, const Tensor& hgates,
                                                     const Tensor& hx) {
    std::vector<Tensor> i = igates.chunk(3, 1), h = hgates.chunk(3, 1);  // r, z, n
    Tensor r = sigmoid(i[0] + h[0]), z = sigmoid(i[1] + h[1]);
    Tensor n = ember::tanh(i[2] + r * h[2]);
    Tensor grad_hy = or_zeros(grad, hx);
    Tensor grad_n = grad_hy * (1.0 - z) * (1.0 - n * n);
    Tensor grad_z = grad_hy * (hx - n) * z * (1.0 - z);
    Tensor grad_r = grad_n * h[2] * r * (1.0 - r);
    return {ember::cat({grad_r, grad_z, grad_n}, 1), ember::cat({grad_r, grad_z, grad_n * r}, 1), grad_hy * z};
  }
};

}  // namespace

std::pair<Tensor, Tensor> lstm_cell_step(const Tensor& igates, const Tensor& hgates, const Tensor& c) {
  if (rnn_cell_fusable(igates)) {
    std::vector<Tensor> hc = FusedLstmCell::apply(igates, hgates, c);
    return {hc[0], hc[1]};
  }
  std::vector<Tensor> gates = (igates + hgates).chunk(4, 1);  // i, f, g, o
  Tensor c_next = sigmoid(gates[1]) * c + sigmoid(gates[0]) * ember::tanh(gates[2]);
  Tensor h_next = sigmoid(gates[3]) * ember::tanh(c_next);
  return {h_next, c_next};
}

Tensor gru_cell_step(const Tensor& igates, const Tensor& hgates, const Tensor& h) {
  if (rnn_cell_fusable(igates)) return FusedGruCell::apply(igates, hgates, h);
  std::vector<Tensor> i = igates.chunk(3, 1), g = hgates.chunk(3, 1);  // r, z, n
  Tensor r = sigmoid(i[0] + g[0]);
  Tensor z = sigmoid(i[1] + g[1]);
  Tensor n = ember::tanh(i[2] + r * g[2]);  // b_hn is inside the reset product, as PyTorch's
  return (h - n) * z + n;
}

namespace {
Tensor cat_rows(const std::vector<Tensor>& rows) { return rows.size() == 1 ? rows[0] : ember::cat(rows, 0); }
}  // namespace

// Note [Batched recurrent weight gradient]
// Each step's hidden part h W_hh^T (+ b_hh) is its own product, but W_hh's gradient is one
// sum over the steps, sum_t g_t^T h_t (g_t the gradient of step t's gates): as one matrix
// product of the stacked rows, G^T H, it is a single well-shaped GEMM, where a product per
// step is T GEMMs of inner size B (20 in the word model) and T additions of
// a W_hh-sized gradient into the accumulated one. RecurrentProduct is the step's product:
// its backward computes the gradient of h at once and hands (g_t, h_t) to the layer's
// stash; the step that ran first in the forward runs last in the backward (every later
// step's gradient reaches it through h), and it returns the whole G^T H (and the sum of G
// for b_hh). Under create_graph (grad mode on in the backward) each step returns its own
// term as recorded ops instead, so double backward holds. A pass need not run the first step
// (autograd::grad with respect to x alone prunes its node, which leads only to h0 and W_hh):
// each entry is dropped by a callback at the end of its pass (queue_callback), so none is
// left for a later pass over a retained graph (except after a pass that ended in an error,
// which runs no callbacks).
namespace {

struct WeightGradStash {
  std::mutex mutex;
  std::vector<Tensor> grads, inputs;  // one slot per step, in forward order
  bool allow_tf32 = false;
};

struct StepSlot {
  std::shared_ptr<WeightGradStash> stash;
  size_t slot;  // 0: the first step of the forward, which sums the stash
};

struct RecurrentProduct : autograd::Function<RecurrentProduct> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& h, const Tensor& weight, StepSlot step) {
    ctx->save_for_backward({h, weight});
    Tensor out = TF32Matmul::product(h, weight.t(), step.stash->allow_tf32);
    ctx->saved_data["step"] = std::move(step);
    return out;
  }
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& h, const Tensor& weight, const Tensor& bias,
                        StepSlot step) {
    ctx->saved_data["bias"] = true;
    return forward(ctx, h, weight, std::move(step)) + bias;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> grads) {
    const std::vector<Tensor> saved = ctx->get_saved_variables();
    const auto& step = std::any_cast<const StepSlot&>(ctx->saved_data["step"]);
    WeightGradStash& stash = *step.stash;
    const bool recorded = is_grad_enabled(), with_bias = ctx->saved_data.count("bias") > 0;
    auto product = [&](const Tensor& a, const Tensor& b) {
      return recorded ? TF32Matmul::apply(a, b, stash.allow_tf32) : TF32Matmul::product(a, b, stash.allow_tf32);
    };
    const Tensor& g = grads[0];
    std::vector<Tensor> out(with_bias ? 3 : 2);
    if (ctx->needs_input_grad(0)) out[0] = product(g, saved[1]);
    if (!ctx->needs_input_grad(1) && !ctx->needs_input_grad(2)) return out;
    if (recorded) {
      out[1] = product(g.t(), saved[0]);
      if (with_bias && ctx->needs_input_grad(2)) out[2] = g.sum(0);
      return out;
    }
    std::lock_guard<std::mutex> lock(stash.mutex);
    stash.grads[step.slot] = g;
    stash.inputs[step.slot] = saved[0].detach();  // no path back to this graph from the stash
    if (step.slot != 0) {
      autograd::queue_callback([stash = step.stash, slot = step.slot] {
        std::lock_guard<std::mutex> lock(stash->mutex);
        stash->grads[slot] = Tensor();
        stash->inputs[slot] = Tensor();
      });
      return out;
    }
    std::vector<Tensor> rows_g, rows_h;
    for (size_t k = 0; k < stash.grads.size(); ++k) {
      if (!stash.grads[k].defined()) continue;  // a step the loss does not reach
      rows_g.push_back(std::exchange(stash.grads[k], Tensor()));
      rows_h.push_back(std::exchange(stash.inputs[k], Tensor()));
    }
    const Tensor all_g = cat_rows(rows_g);
    out[1] = product(all_g.t(), cat_rows(rows_h));
    if (with_bias && ctx->needs_input_grad(2)) out[2] = all_g.sum(0);
    return out;
  }
};

}  // namespace

LayerResult run_layer(const std::string& mode, const Tensor& input_gates, const std::vector<int64_t>& batch_sizes,
                      const Tensor& h0, const Tensor& c0, const Tensor& w_hh, const Tensor& b_hh, const Tensor& w_hr,
                      bool reverse, Tf32 tf32) {
  const auto steps = static_cast<int64_t>(batch_sizes.size());
  const bool lstm = mode == "LSTM";
  // One split for all steps: its backward is one cat of the steps' gradients, where a
  // narrow per step would add T zero-padded copies of the whole projection's gradient.
  const std::vector<Tensor> step_gates = input_gates.split(IntList(batch_sizes.begin(), batch_sizes.end()), 0);

  // The hidden parts' products (Note [Batched recurrent weight gradient]), with project's
  // TF32 decision (Note [Recurrent TF32]).
  auto stash = std::make_shared<WeightGradStash>();
  stash->grads.resize(batch_sizes.size());
  stash->inputs.resize(batch_sizes.size());
  const bool batched = tf32 == Tf32::kCudnnFlag || !h0.is_cuda();
  if (batched) {
    check_same_device(h0, w_hh);
    EMBER_CHECK(w_hh.dtype() == h0.dtype(), ValueError, "mat1 and mat2 must have the same dtype");
    stash->allow_tf32 = h0.is_cuda() && h0.dtype() == kFloat32 && cudnn_rnn_allows_tf32();
  }
  auto hidden_part = [&](const Tensor& h, int64_t t) {
    if (!batched) return project(h, w_hh, b_hh, tf32);
    StepSlot step{stash, static_cast<size_t>(reverse ? steps - 1 - t : t)};
    return b_hh.defined() ? RecurrentProduct::apply(h, w_hh, b_hh, std::move(step))
                          : RecurrentProduct::apply(h, w_hh, std::move(step));
  };

  std::vector<Tensor> outputs(batch_sizes.size());
  Tensor h = h0, c = c0;
  auto step = [&](int64_t t) {
    const Tensor& igates = step_gates[static_cast<size_t>(t)];
    Tensor hgates = hidden_part(h, t);
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
