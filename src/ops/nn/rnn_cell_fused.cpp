// The fused recurrent cells: argument checks and one KernelCall each (rnn_cell_fused.h).
#include "ops/nn/rnn_cell_fused.h"

#include "ember/errors.h"
#include "kernels/dtype_dispatch.h"
#include "ops/launch.h"

namespace ember::detail {
namespace {

// A contiguous operand of the kernels, on `like`'s device and dtype (an undefined gradient:
// zeros of `sizes`).
Tensor operand(const Tensor& t, const Tensor& like, const IntList& sizes, const char* name) {
  if (!t.defined()) return make_tensor(sizes, like.dtype(), like.device()).zero_();
  check_same_device(t, like);
  EMBER_CHECK(t.sizes() == sizes, ValueError, name, ": expected a tensor of size [", sizes.at(0), ", ", sizes.at(1),
              "], got ", t.dim(), "-D of ", t.numel(), " elements");
  EMBER_CHECK(t.dtype() == like.dtype(), TypeError, name, ": expected scalar type ", scalar_type_name(like.dtype()),
              " but found ", scalar_type_name(t.dtype()));
  return t.contiguous();
}

Tensor fresh(const IntList& sizes, const Tensor& like) { return make_tensor(sizes, like.dtype(), like.device()); }

void run(Device device, KernelCall& call) {
  if (!call.outputs.empty() && call.outputs[0].numel() == 0) return;
  launch(device, call);
}

}  // namespace

bool rnn_cell_fusable(const Tensor& gates) { return gates.dtype() == kFloat32 || gates.dtype() == kFloat64; }

std::tuple<Tensor, Tensor, Tensor> lstm_cell_fused(const Tensor& igates_in, const Tensor& hgates_in,
                                                   const Tensor& cx_in) {
  EMBER_CHECK(igates_in.dim() == 2 && igates_in.size(1) % 4 == 0, ValueError,
              "_thnn_fused_lstm_cell: expected input gates of size [B, 4H], got ", igates_in.dim(), "-D");
  const int64_t batch = igates_in.size(0), hidden = igates_in.size(1) / 4;
  Tensor igates = operand(igates_in, igates_in, {batch, 4 * hidden}, "_thnn_fused_lstm_cell");
  Tensor hgates = operand(hgates_in, igates, {batch, 4 * hidden}, "_thnn_fused_lstm_cell");
  Tensor cx = operand(cx_in, igates, {batch, hidden}, "_thnn_fused_lstm_cell");
  Tensor hy = fresh({batch, hidden}, igates), cy = fresh({batch, hidden}, igates);
  Tensor workspace = fresh({batch, 4 * hidden}, igates);
  KernelCall call{OpKind::LstmCell, {make_arg(hy), make_arg(cy), make_arg(workspace)},
                  {make_arg(igates), make_arg(hgates), make_arg(cx)}};
  run(igates.device(), call);
  return {hy, cy, workspace};
}

std::tuple<Tensor, Tensor> lstm_cell_fused_backward(const Tensor& grad_hy, const Tensor& grad_cy, const Tensor& cx,
                                                    const Tensor& cy, const Tensor& workspace) {
  const IntList state = cy.sizes();
  const char* name = "_thnn_fused_lstm_cell_backward";
  Tensor grad_gates = fresh(workspace.sizes(), workspace), grad_cx = fresh(state, workspace);
  // The operands live in locals until the launch: a KernelCall holds only their pointers.
  const Tensor gh = operand(grad_hy, cy, state, name), gc = operand(grad_cy, cy, state, name);
  const Tensor c0 = operand(cx, cy, state, name), c1 = cy.contiguous(), saved = workspace.contiguous();
  KernelCall call{OpKind::LstmCellBackward, {make_arg(grad_gates), make_arg(grad_cx)},
                  {make_arg(gh), make_arg(gc), make_arg(c0), make_arg(c1), make_arg(saved)}};
  run(cy.device(), call);
  return {grad_gates, grad_cx};
}

std::tuple<Tensor, Tensor> gru_cell_fused(const Tensor& igates_in, const Tensor& hgates_in, const Tensor& hx_in) {
  EMBER_CHECK(igates_in.dim() == 2 && igates_in.size(1) % 3 == 0, ValueError,
              "_thnn_fused_gru_cell: expected input gates of size [B, 3H], got ", igates_in.dim(), "-D");
  const int64_t batch = igates_in.size(0), hidden = igates_in.size(1) / 3;
  Tensor igates = operand(igates_in, igates_in, {batch, 3 * hidden}, "_thnn_fused_gru_cell");
  Tensor hgates = operand(hgates_in, igates, {batch, 3 * hidden}, "_thnn_fused_gru_cell");
  Tensor hx = operand(hx_in, igates, {batch, hidden}, "_thnn_fused_gru_cell");
  Tensor hy = fresh({batch, hidden}, igates), workspace = fresh({batch, 5 * hidden}, igates);
  KernelCall call{OpKind::GruCell, {make_arg(hy), make_arg(workspace)},
                  {make_arg(igates), make_arg(hgates), make_arg(hx)}};
  run(igates.device(), call);
  return {hy, workspace};
}

std::tuple<Tensor, Tensor, Tensor> gru_cell_fused_backward(const Tensor& grad_hy, const Tensor& workspace) {
  const int64_t batch = workspace.size(0), hidden = workspace.size(1) / 5;
  Tensor grad_igates = fresh({batch, 3 * hidden}, workspace), grad_hgates = fresh({batch, 3 * hidden}, workspace);
  Tensor grad_hx = fresh({batch, hidden}, workspace);
  // The operands live in locals until the launch: a KernelCall holds only their pointers.
  const Tensor gh = operand(grad_hy, workspace, {batch, hidden}, "_thnn_fused_gru_cell_backward");
  const Tensor saved = workspace.contiguous();
  KernelCall call{OpKind::GruCellBackward, {make_arg(grad_igates), make_arg(grad_hgates), make_arg(grad_hx)},
                  {make_arg(gh), make_arg(saved)}};
  run(workspace.device(), call);
  return {grad_igates, grad_hgates, grad_hx};
}

}  // namespace ember::detail
