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

// A cell's gates {B, G*H} and its state {B, H}, checked and made contiguous (G gates a unit).
struct CellOperands {
  Tensor igates, hgates, state;
  int64_t batch, hidden;
};
CellOperands cell_operands(const Tensor& igates, const Tensor& hgates, const Tensor& state, int64_t gates,
                           const char* name) {
  EMBER_CHECK(igates.dim() == 2 && igates.size(1) % gates == 0, ValueError, name, ": expected input gates of size [B, ",
              gates, "H], got ", igates.dim(), "-D of ", igates.dim() == 2 ? igates.size(1) : igates.numel(),
              igates.dim() == 2 ? " columns" : " elements");
  const int64_t batch = igates.size(0), hidden = igates.size(1) / gates;
  Tensor ig = operand(igates, igates, {batch, gates * hidden}, name);
  return {ig, operand(hgates, ig, {batch, gates * hidden}, name), operand(state, ig, {batch, hidden}, name), batch,
          hidden};
}

}  // namespace

bool rnn_cell_fusable(const Tensor& gates) { return gates.dtype() == kFloat32 || gates.dtype() == kFloat64; }

std::tuple<Tensor, Tensor, Tensor> lstm_cell_fused(const Tensor& igates, const Tensor& hgates, const Tensor& cx) {
  const CellOperands in = cell_operands(igates, hgates, cx, 4, "_thnn_fused_lstm_cell");
  Tensor hy = fresh({in.batch, in.hidden}, in.igates), cy = fresh({in.batch, in.hidden}, in.igates);
  Tensor workspace = fresh({in.batch, 4 * in.hidden}, in.igates);
  KernelCall call{OpKind::LstmCell,
                  {make_arg(hy), make_arg(cy), make_arg(workspace)},
                  {make_arg(in.igates), make_arg(in.hgates), make_arg(in.state)}};
  run(in.igates.device(), call);
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
  KernelCall call{OpKind::LstmCellBackward,
                  {make_arg(grad_gates), make_arg(grad_cx)},
                  {make_arg(gh), make_arg(gc), make_arg(c0), make_arg(c1), make_arg(saved)}};
  run(cy.device(), call);
  return {grad_gates, grad_cx};
}

std::tuple<Tensor, Tensor> gru_cell_fused(const Tensor& igates, const Tensor& hgates, const Tensor& hx) {
  const CellOperands in = cell_operands(igates, hgates, hx, 3, "_thnn_fused_gru_cell");
  Tensor hy = fresh({in.batch, in.hidden}, in.igates), workspace = fresh({in.batch, 5 * in.hidden}, in.igates);
  KernelCall call{OpKind::GruCell,
                  {make_arg(hy), make_arg(workspace)},
                  {make_arg(in.igates), make_arg(in.hgates), make_arg(in.state)}};
  run(in.igates.device(), call);
  return {hy, workspace};
}

std::tuple<Tensor, Tensor, Tensor> gru_cell_fused_backward(const Tensor& grad_hy, const Tensor& workspace) {
  const int64_t batch = workspace.size(0), hidden = workspace.size(1) / 5;
  Tensor grad_igates = fresh({batch, 3 * hidden}, workspace), grad_hgates = fresh({batch, 3 * hidden}, workspace);
  Tensor grad_hx = fresh({batch, hidden}, workspace);
  // The operands live in locals until the launch: a KernelCall holds only their pointers.
  const Tensor gh = operand(grad_hy, workspace, {batch, hidden}, "_thnn_fused_gru_cell_backward");
  const Tensor saved = workspace.contiguous();
  KernelCall call{OpKind::GruCellBackward,
                  {make_arg(grad_igates), make_arg(grad_hgates), make_arg(grad_hx)},
                  {make_arg(gh), make_arg(saved)}};
  run(workspace.device(), call);
  return {grad_igates, grad_hgates, grad_hx};
}

}  // namespace ember::detail
