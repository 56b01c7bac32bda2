# Expected values for tests/test_rnn.cpp, from PyTorch 1.13 (/usr/bin/python3), float64:
#   /usr/bin/python3 tests/rnn_expected.py > tests/rnn_expected.h
# Each case is a list of named tensors: the module's state_dict as PyTorch saved it (its
# keys are the module's), the inputs, the outputs and the gradients of
# loss = sum(out * probe) + sum(h_n * probe_h) (+ sum(c_n * probe_c)) with respect to the
# inputs ("grad.<input>") and the parameters ("grad.<key>").
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
cases = []


def leaf(*shape):
    return torch.randn(*shape, requires_grad=True)


def finish(name, module, inputs, outputs):
    loss = 0
    probes = []
    for key, out in outputs:
        p = torch.randn_like(out)
        probes.append(("probe." + key, p))
        loss = loss + (out * p).sum()
    loss.backward()
    items = [(k, v.detach().clone()) for k, v in module.state_dict().items()]
    items += [(k, v.detach()) for k, v in inputs]
    items += probes
    items += [(k, v.detach()) for k, v in outputs]
    items += [("grad." + k, v.grad) for k, v in inputs if v.requires_grad]
    items += [("grad." + k, p.grad) for k, p in module.named_parameters()]
    cases.append((name, items))


# -- LSTM: 2 layers, bidirectional, projections, given state
m = nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=3)
x, h0, c0 = leaf(4, 2, 3), leaf(4, 2, 3), leaf(4, 2, 5)
out, (h, c) = m(x, (h0, c0))
finish("lstm_proj_bidirectional", m, [("x", x), ("h0", h0), ("c0", c0)], [("out", out), ("h_n", h), ("c_n", c)])

# -- GRU: 2 layers, batch_first, zero initial state
m = nn.GRU(3, 4, num_layers=2, batch_first=True)
x = leaf(2, 5, 3)
out, h = m(x)
finish("gru_batch_first", m, [("x", x)], [("out", out), ("h_n", h)])

# -- RNN relu, bidirectional, given state
m = nn.RNN(3, 4, nonlinearity="relu", bidirectional=True)
x, h0 = leaf(3, 2, 3), leaf(2, 2, 4)
out, h = m(x, h0)
finish("rnn_relu_bidirectional", m, [("x", x), ("h0", h0)], [("out", out), ("h_n", h)])

# -- RNN tanh, 2 layers without bias, unbatched input
m = nn.RNN(3, 4, num_layers=2, bias=False)
x, h0 = leaf(5, 3), leaf(2, 4)
out, h = m(x, h0)
finish("rnn_tanh_unbatched", m, [("x", x), ("h0", h0)], [("out", out), ("h_n", h)])

# -- cells
m = nn.RNNCell(3, 4)
x, h0 = leaf(2, 3), leaf(2, 4)
finish("rnn_cell", m, [("x", x), ("h0", h0)], [("h_n", m(x, h0))])
m = nn.LSTMCell(3, 4)
x, h0, c0 = leaf(2, 3), leaf(2, 4), leaf(2, 4)
h, c = m(x, (h0, c0))
finish("lstm_cell", m, [("x", x), ("h0", h0), ("c0", c0)], [("h_n", h), ("c_n", c)])
m = nn.GRUCell(3, 4)
x, h0 = leaf(2, 3), leaf(2, 4)
finish("gru_cell", m, [("x", x), ("h0", h0)], [("h_n", m(x, h0))])
m = nn.LSTMCell(3, 4, bias=False)
x = leaf(3)
h, c = m(x)
finish("lstm_cell_unbatched", m, [("x", x)], [("h_n", h), ("c_n", c)])

# -- packed: LSTM, bidirectional, unsorted lengths, given state; padded back
m = nn.LSTM(3, 4, bidirectional=True)
x, h0, c0 = leaf(5, 3, 3), leaf(2, 3, 4), leaf(2, 3, 4)
lengths = torch.tensor([2, 5, 3])
packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
out, (h, c) = m(packed, (h0, c0))
padded, _ = pad_packed_sequence(out, total_length=6)
finish("lstm_packed_unsorted", m, [("x", x), ("h0", h0), ("c0", c0), ("lengths", lengths.double())],
       [("out", padded), ("h_n", h), ("c_n", c)])

# -- packed: GRU, 2 layers, batch_first, sorted lengths, zero state
m = nn.GRU(3, 4, num_layers=2, batch_first=True)
x = leaf(3, 4, 3)
lengths = torch.tensor([4, 2, 1])
out, h = m(pack_padded_sequence(x, lengths, batch_first=True))
padded, _ = pad_packed_sequence(out, batch_first=True, padding_value=-1.0)
finish("gru_packed_sorted", m, [("x", x), ("lengths", lengths.double())], [("out", padded), ("h_n", h)])

# -- one training step of examples/wordlm's model (pytorch/examples' RNNModel, dropout 0), tied
class WordModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.0)
        self.encoder = nn.Embedding(12, 6)
        self.rnn = nn.LSTM(6, 6, 2)
        self.decoder = nn.Linear(6, 12)
        self.decoder.weight = self.encoder.weight

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return self.decoder(self.drop(out)).view(-1, 12), hidden


m = WordModel()
tokens = torch.randint(12, (5, 3))
targets = torch.randint(12, (15,))
h0, c0 = torch.randn(2, 3, 6), torch.randn(2, 3, 6)
logits, (h, c) = m(tokens, (h0, c0))
loss = nn.functional.cross_entropy(logits, targets)
loss.backward()
items = [(k, v.detach().clone()) for k, v in m.state_dict().items()]
items += [("tokens", tokens.double()), ("targets", targets.double()), ("h0", h0), ("c0", c0), ("loss", loss.detach())]
items += [("grad." + k, p.grad) for k, p in m.named_parameters()]
cases.append(("wordlm_step", items))

print("// Made by tests/rnn_expected.py from PyTorch 1.13 (/usr/bin/python3); do not edit.")
print("// /usr/bin/python3 tests/rnn_expected.py > tests/rnn_expected.h")
print("#pragma once\n\n#include <cstdint>\n#include <string>\n#include <utility>\n#include <vector>\n")
print("namespace ember::rnn_expected {\n")
print("struct Values {\n  std::vector<int64_t> shape;\n  std::vector<double> data;\n};")
print("using Case = std::vector<std::pair<std::string, Values>>;\n")
for name, items in cases:
    print("inline const Case k_%s = {" % name)
    for key, v in items:
        shape = ", ".join(str(s) for s in v.shape)
        data = ", ".join(repr(float(e)) for e in v.reshape(-1).tolist())
        print('    {"%s", {{%s}, {%s}}},' % (key, shape, data))
    print("};\n")
print("}  // namespace ember::rnn_expected")
