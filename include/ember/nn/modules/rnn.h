// Recurrent networks: nn::RNN, nn::LSTM, nn::GRU and their cells (torch.nn's).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/nn/module.h"
#include "ember/nn/utils/rnn.h"

namespace ember::nn {

/// What RNN, LSTM and GRU share (PyTorch's RNNBase): the parameters, registered per layer
/// and then per direction as weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k},
/// weight_hr_l{k} (LSTM with proj_size > 0), with "_reverse" for the second direction; all
/// start uniform(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as PyTorch's.
///
/// Each layer and direction runs as PyTorch's cpu path does: the input projection of the
/// whole sequence as one matrix product, then per step one product for the recurrence and
/// the element-wise gate math. A packed batch runs only its live rows at each step.
class RNNBase : public Module {
 public:
  /// PyTorch's flatten_parameters(): ember keeps no cuDNN buffer, so there is nothing to do.
  void flatten_parameters() {}
  /// Re-draws every parameter uniform(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).
  void reset_parameters();
  /// "3, 4, proj_size=2, num_layers=2, bidirectional=True": the sizes, then what differs
  /// from the defaults, in PyTorch's order.
  std::string extra_repr() const override;
  /// The parameters of layer `layer`, direction `direction`: w_ih, w_hh, then b_ih, b_hh
  /// (with bias), then w_hr (with proj_size); PyTorch's all_weights[layer * D + direction].
  const std::vector<Tensor>& weights(int64_t layer, int64_t direction) const;

  std::string mode;  // "RNN_TANH", "RNN_RELU", "LSTM" or "GRU"
  int64_t input_size, hidden_size, num_layers;
  bool bias, batch_first;
  double dropout;
  bool bidirectional;
  int64_t proj_size;

 protected:
  /// ValueError with PyTorch's message for a non-positive size or layer count, a dropout
  /// outside [0, 1], a negative proj_size or one not smaller than hidden_size.
  RNNBase(std::string mode, int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias, bool batch_first,
          double dropout, bool bidirectional, int64_t proj_size, const char* name);

  /// The forward pass of a Tensor input (3-D, or 2-D unbatched): checks, default states,
  /// layout. `state` holds h_0 (and c_0 for the LSTM), possibly undefined.
  std::pair<Tensor, std::vector<Tensor>> forward_tensor(const Tensor& input, std::vector<Tensor> state);
  /// The forward pass of a packed batch; the returned states are in the caller's batch order.
  std::pair<utils::rnn::PackedSequence, std::vector<Tensor>> forward_packed(const utils::rnn::PackedSequence& input,
                                                                            std::vector<Tensor> state);
  void rebind_members(const MemberRemap& remap) override;

 private:
  int64_t num_directions() const { return bidirectional ? 2 : 1; }
  int64_t output_hidden() const { return proj_size > 0 ? proj_size : hidden_size; }
  void check_input(const Tensor& data, int64_t expected_dim) const;
  void check_state(const std::vector<Tensor>& state, const Tensor& data, int64_t batch) const;
  /// The stack over packed rows `data` [sum(batch_sizes), input_size] and full states
  /// [L * D, batch, ...]; returns the output rows and the final states.
  std::pair<Tensor, std::vector<Tensor>> run(const Tensor& data, const std::vector<int64_t>& batch_sizes,
                                             const std::vector<Tensor>& state);

  std::vector<std::vector<Tensor>> weights_;  // [layer * D + direction]
};

/// torch.nn.RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu).
class RNN : public RNNBase {
 public:
  /// nonlinearity "tanh" or "relu" (else ValueError "Unknown nonlinearity 'x'. Select from
  /// 'tanh' or 'relu'.").
  RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, const std::string& nonlinearity = "tanh",
      bool bias = true, bool batch_first = false, double dropout = 0.0, bool bidirectional = false);
  /// input [L, N, input_size] ([N, L, input_size] batch_first; [L, input_size] unbatched),
  /// h_0 [D * num_layers, N, hidden_size] (zeros when undefined). Returns the output
  /// [L, N, D * hidden_size] and h_n.
  std::pair<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {});
  std::pair<utils::rnn::PackedSequence, Tensor> forward(const utils::rnn::PackedSequence& input, const Tensor& hx = {});
  std::shared_ptr<Module> clone() const override;

  std::string nonlinearity;
};

/// torch.nn.LSTM: gates i, f, g, o; c' = f c + i g; h' = o tanh(c') (then h' W_hr^T with
/// proj_size > 0).
class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true, bool batch_first = false,
       double dropout = 0.0, bool bidirectional = false, int64_t proj_size = 0);
  /// As RNN's, with the state (h_0 [D * num_layers, N, proj_size or hidden_size], c_0
  /// [D * num_layers, N, hidden_size]); returns the output and (h_n, c_n).
  std::pair<Tensor, std::pair<Tensor, Tensor>> forward(const Tensor& input,
                                                       const std::optional<std::pair<Tensor, Tensor>>& hx = {});
  std::pair<utils::rnn::PackedSequence, std::pair<Tensor, Tensor>> forward(
      const utils::rnn::PackedSequence& input, const std::optional<std::pair<Tensor, Tensor>>& hx = {});
  std::shared_ptr<Module> clone() const override;
};

/// torch.nn.GRU: r = sigmoid(..), z = sigmoid(..), n = tanh(x W_in^T + b_in + r (h W_hn^T +
/// b_hn)), h' = (1 - z) n + z h.
class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true, bool batch_first = false,
      double dropout = 0.0, bool bidirectional = false);
  std::pair<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {});
  std::pair<utils::rnn::PackedSequence, Tensor> forward(const utils::rnn::PackedSequence& input, const Tensor& hx = {});
  std::shared_ptr<Module> clone() const override;
};

/// What the cells share (PyTorch's RNNCellBase): weight_ih [k * hidden_size, input_size],
/// weight_hh [k * hidden_size, hidden_size], bias_ih and bias_hh [k * hidden_size], all
/// uniform(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).
class RNNCellBase : public Module {
 public:
  void reset_parameters();
  std::string extra_repr() const override;

  int64_t input_size, hidden_size;
  bool bias;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;  // biases undefined without bias

 protected:
  RNNCellBase(int64_t input_size, int64_t hidden_size, bool bias, int64_t gates, const char* name);
  void rebind_members(const MemberRemap& remap) override;
};

/// torch.nn.RNNCell: input [N, input_size] or [input_size], hidden likewise; returns h'.
class RNNCell : public RNNCellBase {
 public:
  /// nonlinearity "tanh" or "relu" (else ValueError "Unknown nonlinearity: x").
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true, const std::string& nonlinearity = "tanh");
  Tensor forward(const Tensor& input, const Tensor& hx);
  Tensor forward(const Tensor& input) override { return forward(input, Tensor()); }
  std::shared_ptr<Module> clone() const override;
  std::string extra_repr() const override;

  std::string nonlinearity;
};

/// torch.nn.LSTMCell: returns (h', c').
class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  std::pair<Tensor, Tensor> forward(const Tensor& input, const std::optional<std::pair<Tensor, Tensor>>& hx = {});
  std::shared_ptr<Module> clone() const override;
};

/// torch.nn.GRUCell: returns h'.
class GRUCell : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true);
  Tensor forward(const Tensor& input, const Tensor& hx);
  Tensor forward(const Tensor& input) override { return forward(input, Tensor()); }
  std::shared_ptr<Module> clone() const override;
};

}  // namespace ember::nn
