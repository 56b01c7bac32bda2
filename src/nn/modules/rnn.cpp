// nn::RNN, nn::LSTM, nn::GRU: PyTorch's RNNBase (parameters, checks, layout), running the
// recurrence of src/nn/modules/rnn_layer.cpp per layer and direction.
#include "ember/nn/modules/rnn.h"

#include <cmath>
#include <iostream>
#include <new>

#include "ember/factories.h"
#include "ember/nn.h"
#include "ember/nn/init.h"
#include "ember/ops.h"
#include "nn/copy_module.h"
#include "nn/module_context.h"
#include "nn/modules/rnn_layer.h"
#include "nn/python_repr.h"
#include "ops/autocast.h"

namespace ember::nn {
namespace {

int64_t gate_count(const std::string& mode) { return mode == "LSTM" ? 4 : mode == "GRU" ? 3 : 1; }

// Python's str(list(t.size())): "[2, 2, 4]".
std::string size_list(const Tensor& t) {
  std::string out = "[";
  for (int64_t i = 0; i < t.dim(); ++i) out += (i ? ", " : "") + std::to_string(t.size(i));
  return out + "]";
}

// The class name in the forward's messages, and PyTorch 2.x's slightly different wordings.
const char* class_name(const std::string& mode) { return mode == "LSTM" ? "LSTM" : mode == "GRU" ? "GRU" : "RNN"; }

}  // namespace

RNNBase::RNNBase(std::string mode_in, int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias,
                 bool batch_first, double dropout, bool bidirectional, int64_t proj_size, const char* name)
    : Module(name),
      mode(std::move(mode_in)),
      input_size(input_size),
      hidden_size(hidden_size),
      num_layers(num_layers),
      bias(bias),
      batch_first(batch_first),
      dropout(dropout),
      bidirectional(bidirectional),
      proj_size(proj_size) {
  EMBER_CHECK(dropout >= 0 && dropout <= 1, ValueError,
              "dropout should be a number in range [0, 1] representing the probability of an element being zeroed");
  if (dropout > 0 && num_layers == 1) {
    std::cerr << "UserWarning: dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                 "expects num_layers greater than 1, but got dropout="
              << detail::python_float(dropout) << " and num_layers=" << num_layers << "\n";
  }
  EMBER_CHECK(hidden_size > 0, ValueError, "hidden_size must be greater than zero");
  EMBER_CHECK(num_layers > 0, ValueError, "num_layers must be greater than zero");
  EMBER_CHECK(input_size >= 0, ValueError, "input_size must be non-negative, but got ", input_size);
  EMBER_CHECK(proj_size >= 0, ValueError, "proj_size should be a positive integer or zero to disable projections");
  EMBER_CHECK(proj_size < hidden_size, ValueError, "proj_size has to be smaller than hidden_size");
  EMBER_CHECK(proj_size == 0 || this->mode == "LSTM", ValueError,
              "proj_size argument is only supported for LSTM, not RNN or GRU");

  const int64_t gate_size = gate_count(mode) * hidden_size, real_hidden = output_hidden();
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    const int64_t layer_input = layer == 0 ? input_size : real_hidden * num_directions();
    for (int64_t direction = 0; direction < num_directions(); ++direction) {
      const std::string suffix = "_l" + std::to_string(layer) + (direction == 1 ? "_reverse" : "");
      std::vector<Tensor> w;
      w.push_back(register_parameter("weight_ih" + suffix, empty({gate_size, layer_input})));
      w.push_back(register_parameter("weight_hh" + suffix, empty({gate_size, real_hidden})));
      if (bias) {
        w.push_back(register_parameter("bias_ih" + suffix, empty({gate_size})));
        w.push_back(register_parameter("bias_hh" + suffix, empty({gate_size})));
      }
      if (proj_size > 0) w.push_back(register_parameter("weight_hr" + suffix, empty({proj_size, hidden_size})));
      weights_.push_back(std::move(w));
    }
  }
  reset_parameters();
}

void RNNBase::rebind_members(const MemberRemap& remap) {
  for (auto& layer : weights_)
    for (Tensor& weight : layer) remap(weight);
}

void RNNBase::reset_parameters() {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  for (const auto& w : weights_) {
    for (const Tensor& p : w) init::uniform_(p, -bound, bound);
  }
}

const std::vector<Tensor>& RNNBase::weights(int64_t layer, int64_t direction) const {
  EMBER_CHECK(layer >= 0 && layer < num_layers && direction >= 0 && direction < num_directions(), IndexError,
              "weights(): no layer ", layer, " direction ", direction, " in ", repr());
  return weights_[static_cast<size_t>(layer * num_directions() + direction)];
}

std::string RNNBase::extra_repr() const {
  std::string s = detail::cat(input_size, ", ", hidden_size);
  if (proj_size != 0) s += detail::cat(", proj_size=", proj_size);
  if (num_layers != 1) s += detail::cat(", num_layers=", num_layers);
  if (!bias) s += ", bias=False";
  if (batch_first) s += ", batch_first=True";
  if (dropout != 0) s += ", dropout=" + detail::python_float(dropout);
  if (bidirectional) s += ", bidirectional=True";
  return s;
}

void RNNBase::check_input(const Tensor& data, int64_t expected_dim) const {
  const Tensor& w = weights_.front().front();
  EMBER_CHECK(data.dtype() == w.dtype(), ValueError, "input must have the type ", w.dtype(), ", got type ",
              data.dtype());
  EMBER_CHECK(data.dim() == expected_dim, ValueError, "input must have ", expected_dim, " dimensions, got ",
              data.dim());
  EMBER_CHECK(data.size(-1) == input_size, ValueError, "input.size(-1) must be equal to input_size. Expected ",
              input_size, ", got ", data.size(-1));
  EMBER_CHECK(data.device() == w.device(), DeviceError,
              "Input and parameter tensors are not at the same device, found input tensor at ", data.device(),
              " and parameter tensor at ", w.device());
}

void RNNBase::check_state(const std::vector<Tensor>& state, const Tensor& data, int64_t batch) const {
  const int64_t rows = num_layers * num_directions();
  for (size_t k = 0; k < state.size(); ++k) {
    const IntList expected{rows, batch, k == 0 ? output_hidden() : hidden_size};
    const std::string label = mode == "LSTM" ? detail::cat("hidden[", k, "]") : "hidden";
    EMBER_CHECK(state[k].sizes() == expected, ValueError, "Expected ", label, " size ", detail::python_tuple(expected),
                ", got ", size_list(state[k]));
    EMBER_CHECK(state[k].device() == data.device(), DeviceError,
                "Input and hidden tensors are not at the same device, found input tensor at ", data.device(),
                " and hidden tensor at ", state[k].device());
    EMBER_CHECK(state[k].dtype() == data.dtype() ||
                    ember::detail::autocast_unifies(ember::detail::AutocastOp::kRnn, data, state[k]),
                ValueError, "Expected ", label, " to have the input's type ", data.dtype(), ", got ", state[k].dtype());
  }
}

std::pair<Tensor, std::vector<Tensor>> RNNBase::run(const Tensor& data, const std::vector<int64_t>& batch_sizes,
                                                    const std::vector<Tensor>& state_in) {
  // Under autocast the whole network runs in its dtype, as PyTorch's cuDNN (_cudnn_rnn) and
  // oneDNN (mkldnn_rnn_layer) layers do (Note [Autocast] in src/ops/autocast.cpp).
  std::vector<Tensor> inputs{data};
  inputs.insert(inputs.end(), state_in.begin(), state_in.end());
  const ember::detail::AutocastScope ac(ember::detail::AutocastOp::kRnn, inputs);
  const std::vector<Tensor> state = ac.cast(state_in);
  const bool lstm = mode == "LSTM";
  const int64_t directions = num_directions();
  Tensor layer_input = ac.cast(data);
  std::vector<Tensor> h_n, c_n;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    std::vector<Tensor> outputs;
    for (int64_t direction = 0; direction < directions; ++direction) {
      const std::vector<Tensor> w = ac.cast(weights(layer, direction));
      Tensor b_ih = bias ? w[2] : Tensor(), b_hh = bias ? w[3] : Tensor();
      if (bias && mode != "GRU") {
        // Both biases only ever meet in the gates' sum: add them once, to the input projection
        // of every row, rather than to each step's recurrence (and sum b_hh's gradient once).
        // The GRU's b_hn stays in the recurrence: it is inside the reset gate's product.
        b_ih = b_ih + b_hh;
        b_hh = Tensor();
      }
      const Tensor w_hr = proj_size > 0 ? w.back() : Tensor();
      const int64_t index = layer * directions + direction;
      const auto tf32 = detail::nn::Tf32::kCudnnFlag;  // Note [Recurrent TF32]
      Tensor input_gates = detail::nn::project(layer_input, w[0], b_ih, tf32);
      auto r = detail::nn::run_layer(mode, input_gates, batch_sizes, state[0][index], lstm ? state[1][index] : Tensor(),
                                     w[1], b_hh, w_hr, direction == 1, tf32);
      outputs.push_back(r.output);
      h_n.push_back(r.h_n);
      if (lstm) c_n.push_back(r.c_n);
    }
    layer_input = directions == 1 ? outputs[0] : cat(outputs, 1);
    if (dropout > 0 && is_training() && layer + 1 < num_layers) {
      layer_input = functional::dropout(layer_input, dropout, true);
    }
  }
  std::vector<Tensor> final_state{stack(h_n, 0)};
  if (lstm) final_state.push_back(stack(c_n, 0));
  return {layer_input, final_state};
}

std::pair<Tensor, std::vector<Tensor>> RNNBase::forward_tensor(const Tensor& input, std::vector<Tensor> state) {
  const bool lstm = mode == "LSTM";
  EMBER_CHECK(input.dim() == 2 || input.dim() == 3, ValueError, class_name(mode),
              ": Expected input to be 2D or 3D, got ", input.dim(), mode.rfind("RNN", 0) == 0 ? "D tensor" : "D",
              " instead");
  const bool batched = input.dim() == 3;
  const int64_t want = batched ? 3 : 2;
  if (state[0].defined()) {
    if (lstm) {
      EMBER_CHECK(state[0].dim() == want && state[1].dim() == want, ValueError,
                  batched ? "For batched 3-D input, hx and cx should also be 3-D"
                          : "For unbatched 2-D input, hx and cx should also be 2-D",
                  " but got (", state[0].dim(), "-D, ", state[1].dim(), "-D) tensors");
    } else {
      EMBER_CHECK(
          state[0].dim() == want, ValueError,
          batched ? "For batched 3-D input, hx should also be 3-D" : "For unbatched 2-D input, hx should also be 2-D",
          " but got ", state[0].dim(), "-D tensor");
    }
    if (!batched) {
      for (Tensor& s : state) s = s.unsqueeze(1);
    }
  }
  Tensor x = !batched ? input.unsqueeze(1) : batch_first ? input.transpose(0, 1) : input;
  check_input(x, 3);
  const int64_t steps = x.size(0), batch = x.size(1);
  EMBER_CHECK(steps > 0, ValueError, "Expected sequence length to be larger than 0 in RNN");
  if (!state[0].defined()) {
    // The spec's practice: the initial state is made from the input, on its device and dtype.
    state[0] = x.new_zeros({num_layers * num_directions(), batch, output_hidden()});
    if (lstm) state[1] = x.new_zeros({num_layers * num_directions(), batch, hidden_size});
  }
  check_state(state, x, batch);
  // A broadcast input may have more steps than a host vector can count: the allocator's error.
  std::vector<int64_t> batch_sizes;
  try {
    batch_sizes.assign(static_cast<size_t>(steps), batch);
  } catch (const std::exception&) {  // std::bad_alloc, or std::length_error past max_size()
    ember::detail::fail<OutOfMemoryError>("DefaultCPUAllocator: not enough memory: ", class_name(mode), " over ", steps,
                                          " steps needs ", steps, " step sizes on the host");
  }
  auto [rows, final_state] = run(x.reshape({steps * batch, input_size}), batch_sizes, state);
  Tensor output = rows.view({steps, batch, rows.size(1)});
  if (!batched) {
    output = output.squeeze(1);
    for (Tensor& s : final_state) s = s.squeeze(1);
  } else if (batch_first) {
    output = output.transpose(0, 1);
  }
  return {output, final_state};
}

std::pair<utils::rnn::PackedSequence, std::vector<Tensor>> RNNBase::forward_packed(
    const utils::rnn::PackedSequence& input, std::vector<Tensor> state) {
  const Tensor& data = input.data();
  check_input(data, 2);
  const std::vector<int64_t> batch_sizes = input.batch_sizes().to_vector<int64_t>();
  EMBER_CHECK(!batch_sizes.empty(), ValueError, "Expected sequence length to be larger than 0 in RNN");
  const int64_t batch = batch_sizes[0];
  if (!state[0].defined()) {
    state[0] = data.new_zeros({num_layers * num_directions(), batch, output_hidden()});
    if (mode == "LSTM") state[1] = data.new_zeros({num_layers * num_directions(), batch, hidden_size});
  } else if (input.sorted_indices().defined()) {
    // The caller's states are in the caller's batch order; the packed rows are sorted.
    for (Tensor& s : state) {
      EMBER_CHECK(s.dim() == 3, ValueError, "For batched 3-D input, hx should also be 3-D but got ", s.dim(),
                  "-D tensor");
      s = s.index_select(1, input.sorted_indices().to(s.device()));
    }
  }
  check_state(state, data, batch);
  auto [rows, final_state] = run(data, batch_sizes, state);
  if (input.unsorted_indices().defined()) {
    for (Tensor& s : final_state) s = s.index_select(1, input.unsorted_indices());
  }
  return {utils::rnn::PackedSequence(rows, input.batch_sizes(), input.sorted_indices(), input.unsorted_indices()),
          final_state};
}

// ---- RNN, LSTM, GRU ------------------------------------------------------------------------

namespace {
std::string rnn_mode(const std::string& nonlinearity) {
  EMBER_CHECK(nonlinearity == "tanh" || nonlinearity == "relu", ValueError, "Unknown nonlinearity '", nonlinearity,
              "'. Select from 'tanh' or 'relu'.");
  return nonlinearity == "tanh" ? "RNN_TANH" : "RNN_RELU";
}

}  // namespace

RNN::RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers, const std::string& nonlinearity, bool bias,
         bool batch_first, double dropout, bool bidirectional)
    : RNNBase(rnn_mode(nonlinearity), input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
              "RNN"),
      nonlinearity(nonlinearity) {}

std::pair<Tensor, Tensor> RNN::forward(const Tensor& input, const Tensor& hx) {
  auto [out, state] = forward_tensor(input, {hx});
  return {out, state[0]};
}

std::pair<utils::rnn::PackedSequence, Tensor> RNN::forward(const utils::rnn::PackedSequence& input, const Tensor& hx) {
  auto [out, state] = forward_packed(input, {hx});
  return {out, state[0]};
}

std::shared_ptr<Module> RNN::clone() const {
  return detail::nn::clone_as(*this, [&] {
    return std::make_shared<RNN>(input_size, hidden_size, num_layers, nonlinearity, bias, batch_first, dropout,
                                 bidirectional);
  });
}

namespace {
std::vector<Tensor> lstm_state(const std::optional<std::pair<Tensor, Tensor>>& hx) {
  return hx ? std::vector<Tensor>{hx->first, hx->second} : std::vector<Tensor>{Tensor(), Tensor()};
}
}  // namespace

LSTM::LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias, bool batch_first, double dropout,
           bool bidirectional, int64_t proj_size)
    : RNNBase("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, proj_size,
              "LSTM") {}

std::pair<Tensor, std::pair<Tensor, Tensor>> LSTM::forward(const Tensor& input,
                                                           const std::optional<std::pair<Tensor, Tensor>>& hx) {
  auto [out, state] = forward_tensor(input, lstm_state(hx));
  return {out, {state[0], state[1]}};
}

std::pair<utils::rnn::PackedSequence, std::pair<Tensor, Tensor>> LSTM::forward(
    const utils::rnn::PackedSequence& input, const std::optional<std::pair<Tensor, Tensor>>& hx) {
  auto [out, state] = forward_packed(input, lstm_state(hx));
  return {out, {state[0], state[1]}};
}

std::shared_ptr<Module> LSTM::clone() const {
  return detail::nn::clone_as(*this, [&] {
    return std::make_shared<LSTM>(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                                  proj_size);
  });
}

GRU::GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias, bool batch_first, double dropout,
         bool bidirectional)
    : RNNBase("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0, "GRU") {}

std::pair<Tensor, Tensor> GRU::forward(const Tensor& input, const Tensor& hx) {
  auto [out, state] = forward_tensor(input, {hx});
  return {out, state[0]};
}

std::pair<utils::rnn::PackedSequence, Tensor> GRU::forward(const utils::rnn::PackedSequence& input, const Tensor& hx) {
  auto [out, state] = forward_packed(input, {hx});
  return {out, state[0]};
}

std::shared_ptr<Module> GRU::clone() const {
  return detail::nn::clone_as(*this, [&] {
    return std::make_shared<GRU>(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional);
  });
}

}  // namespace ember::nn
