// nn::RNNCell, nn::LSTMCell, nn::GRUCell: one step of the recurrences of rnn_layer.cpp.
#include <cmath>

#include "ember/factories.h"
#include "ember/nn/init.h"
#include "ember/nn/modules/rnn.h"
#include "ember/ops.h"
#include "nn/copy_module.h"
#include "nn/modules/rnn_layer.h"
#include "ops/autocast.h"

namespace ember::nn {
namespace {

// PyTorch's RNNCell.forward checks, then RNN.cpp's check_rnn_cell_forward_input/_hidden.
void check_cell_input(const RNNCellBase& cell, const Tensor& input) {
  EMBER_CHECK(input.size(1) == cell.input_size, ValueError, "input has inconsistent input_size: got ", input.size(1),
              " expected ", cell.input_size);
  EMBER_CHECK(input.device() == cell.weight_ih.device(), DeviceError,
              "Expected all tensors to be on the same device, but found at least two devices, ",
              cell.weight_ih.device(), " and ", input.device(), "!");
}

void check_cell_hidden(const RNNCellBase& cell, const Tensor& input, const Tensor& hx, int label, bool batched) {
  EMBER_CHECK(hx.dim() == input.dim(), ValueError, cell.name(), ": Expected hidden", label, " to be ",
              batched ? "2D for a 2D input" : "1D for a 1D input", ", got ", hx.dim() - (batched ? 0 : 1), "D");
  EMBER_CHECK(input.size(0) == hx.size(0), ValueError, "Input batch size ", input.size(0), " doesn't match hidden",
              label, " batch size ", hx.size(0));
  EMBER_CHECK(hx.size(1) == cell.hidden_size, ValueError, "hidden", label, " has inconsistent hidden_size: got ",
              hx.size(1), ", expected ", cell.hidden_size);
  EMBER_CHECK(hx.device() == input.device(), DeviceError,
              "Expected all tensors to be on the same device, but found at least two devices, ", input.device(),
              " and ", hx.device(), "!");
}

void check_dims(const RNNCellBase& cell, const Tensor& t, const std::string& what) {
  EMBER_CHECK(t.dim() == 1 || t.dim() == 2, ValueError, cell.name(), ": Expected ", what, " to be 1D or 2D, got ",
              t.dim(), "D instead");
}

Tensor batched_hidden(const RNNCellBase& cell, const Tensor& input, const Tensor& hx, int label, bool batched) {
  if (!hx.defined()) return input.new_zeros({input.size(0), cell.hidden_size});
  Tensor h = batched ? hx : hx.unsqueeze(0);
  check_cell_hidden(cell, input, h, label, batched);
  return h;
}

struct CellInputs {
  Tensor x;                    // the input, 2-D
  std::vector<Tensor> states;  // h (and c), 2-D; zeros where not given
  bool batched;
};

// PyTorch's checks of a cell's input and states (`names` in its messages), then both made
// batched.
CellInputs cell_inputs(const RNNCellBase& cell, const Tensor& input, const std::vector<Tensor>& hx,
                       const std::vector<const char*>& names) {
  check_dims(cell, input, "input");
  for (size_t k = 0; k < hx.size(); ++k) {
    if (hx[k].defined()) check_dims(cell, hx[k], names[k]);
  }
  CellInputs in;
  in.batched = input.dim() == 2;
  in.x = in.batched ? input : input.unsqueeze(0);
  check_cell_input(cell, in.x);
  for (size_t k = 0; k < hx.size(); ++k) {
    in.states.push_back(batched_hidden(cell, in.x, hx[k], static_cast<int>(k), in.batched));
  }
  return in;
}

}  // namespace

RNNCellBase::RNNCellBase(int64_t input_size, int64_t hidden_size, bool bias, int64_t gates, const char* name)
    : Module(name), input_size(input_size), hidden_size(hidden_size), bias(bias) {
  EMBER_CHECK(hidden_size > 0, ValueError, "hidden_size must be greater than zero");
  EMBER_CHECK(input_size >= 0, ValueError, "input_size must be non-negative, but got ", input_size);
  weight_ih = register_parameter("weight_ih", empty({gates * hidden_size, input_size}));
  weight_hh = register_parameter("weight_hh", empty({gates * hidden_size, hidden_size}));
  bias_ih = register_parameter("bias_ih", bias ? empty({gates * hidden_size}) : Tensor());
  bias_hh = register_parameter("bias_hh", bias ? empty({gates * hidden_size}) : Tensor());
  reset_parameters();
}

void RNNCellBase::rebind_members(const MemberRemap& remap) {
  remap(weight_ih);
  remap(weight_hh);
  remap(bias_ih);
  remap(bias_hh);
}

void RNNCellBase::reset_parameters() {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  for (Tensor& p : parameters(false)) init::uniform_(p, -bound, bound);
}

std::string RNNCellBase::extra_repr() const {
  return detail::cat(input_size, ", ", hidden_size, bias ? "" : ", bias=False");
}

RNNCell::RNNCell(int64_t input_size, int64_t hidden_size, bool bias, const std::string& nonlinearity_in)
    : RNNCellBase(input_size, hidden_size, bias, 1, "RNNCell"), nonlinearity(nonlinearity_in) {
  EMBER_CHECK(nonlinearity == "tanh" || nonlinearity == "relu", ValueError, "Unknown nonlinearity: ", nonlinearity);
}

Tensor RNNCell::forward(const Tensor& input, const Tensor& hx) {
  const CellInputs in = cell_inputs(*this, input, {hx}, {"hidden"});
  const ember::detail::AutocastScope ac(ember::detail::AutocastOp::kRnnCell, {&in.x, &in.states[0], &weight_ih});
  const Tensor h = ac.cast(in.states[0]);
  Tensor out =
      detail::nn::rnn_cell_step(detail::nn::project(ac.cast(in.x), ac.cast(weight_ih), ac.cast(bias_ih)),
                                detail::nn::project(h, ac.cast(weight_hh), ac.cast(bias_hh)), nonlinearity == "relu");
  return in.batched ? out : out.squeeze(0);
}

std::shared_ptr<Module> RNNCell::clone() const {
  return detail::nn::clone_as(*this,
                              [&] { return std::make_shared<RNNCell>(input_size, hidden_size, bias, nonlinearity); });
}

std::string RNNCell::extra_repr() const {
  return RNNCellBase::extra_repr() + (nonlinearity != "tanh" ? ", nonlinearity=" + nonlinearity : "");
}

LSTMCell::LSTMCell(int64_t input_size, int64_t hidden_size, bool bias)
    : RNNCellBase(input_size, hidden_size, bias, 4, "LSTMCell") {}

std::pair<Tensor, Tensor> LSTMCell::forward(const Tensor& input, const std::optional<std::pair<Tensor, Tensor>>& hx) {
  const CellInputs in = cell_inputs(
      *this, input, hx ? std::vector<Tensor>{hx->first, hx->second} : std::vector<Tensor>{Tensor(), Tensor()},
      {"hx[0]", "hx[1]"});
  const ember::detail::AutocastScope ac(ember::detail::AutocastOp::kRnnCell,
                                        {&in.x, &in.states[0], &in.states[1], &weight_ih});
  auto [h_next, c_next] = detail::nn::lstm_cell_step(
      detail::nn::project(ac.cast(in.x), ac.cast(weight_ih), ac.cast(bias_ih)),
      detail::nn::project(ac.cast(in.states[0]), ac.cast(weight_hh), ac.cast(bias_hh)), ac.cast(in.states[1]));
  if (!in.batched) return {h_next.squeeze(0), c_next.squeeze(0)};
  return {h_next, c_next};
}

std::shared_ptr<Module> LSTMCell::clone() const {
  return detail::nn::clone_as(*this, [&] { return std::make_shared<LSTMCell>(input_size, hidden_size, bias); });
}

GRUCell::GRUCell(int64_t input_size, int64_t hidden_size, bool bias)
    : RNNCellBase(input_size, hidden_size, bias, 3, "GRUCell") {}

Tensor GRUCell::forward(const Tensor& input, const Tensor& hx) {
  const CellInputs in = cell_inputs(*this, input, {hx}, {"hidden"});
  const ember::detail::AutocastScope ac(ember::detail::AutocastOp::kRnnCell, {&in.x, &in.states[0], &weight_ih});
  const Tensor h = ac.cast(in.states[0]);
  Tensor out = detail::nn::gru_cell_step(detail::nn::project(ac.cast(in.x), ac.cast(weight_ih), ac.cast(bias_ih)),
                                         detail::nn::project(h, ac.cast(weight_hh), ac.cast(bias_hh)), h);
  return in.batched ? out : out.squeeze(0);
}

std::shared_ptr<Module> GRUCell::clone() const {
  return detail::nn::clone_as(*this, [&] { return std::make_shared<GRUCell>(input_size, hidden_size, bias); });
}

}  // namespace ember::nn
