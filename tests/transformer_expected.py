# Expected values for tests/test_transformer.cpp, from PyTorch 1.13 (/usr/bin/python3):
#   /usr/bin/python3 tests/transformer_expected.py > tests/transformer_expected.h
# Each case is a list of named float32 tensors: the module's state_dict as PyTorch saved it
# (its keys are the module's), the inputs, the outputs and the gradients of
# loss = (output * probe).sum() with respect to inputs ("grad.<input>") and parameters
# ("grad.<key>"). The character model is the one in examples/charlm_model.h, built here
# from torch.nn's modules under the same names.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
cases = []

def emit_case(name, items):
    cases.append((name, items))

def params_and_grads(module, prefix=""):
    out = [(k, v.detach().clone()) for k, v in module.state_dict().items()]
    grads = [("grad." + k, p.grad.detach().clone()) for k, p in module.named_parameters()]
    return out, grads

def causal(t):
    return torch.triu(torch.ones(t, t, dtype=torch.bool), 1)

def perturb(module):
    # LayerNorms and zero biases start at constants; random values test that they are used.
    with torch.no_grad():
        for k, p in module.named_parameters():
            if k.endswith("bias") or "norm" in k:
                p.add_(0.1 * torch.randn_like(p))

# -- MultiheadAttention, self-attention, batch_first, causal bool mask and a padded key
m = nn.MultiheadAttention(8, 2, batch_first=True)
perturb(m)
x = torch.randn(2, 3, 8, requires_grad=True)
kpm = torch.tensor([[False, False, False], [False, False, True]])
out, w = m(x, x, x, key_padding_mask=kpm, need_weights=True, attn_mask=causal(3))
probe = torch.randn_like(out)
(out * probe).sum().backward()
state, grads = params_and_grads(m)
emit_case("mha_self", state + [("x", x.detach()), ("probe", probe), ("out", out.detach()), ("weights", w.detach()),
                               ("grad.x", x.grad)] + grads)

# -- MultiheadAttention, cross-attention, sequence-first, float mask, weights per head
m = nn.MultiheadAttention(8, 4)
perturb(m)
q = torch.randn(2, 2, 8, requires_grad=True)
k = torch.randn(3, 2, 8, requires_grad=True)
v = torch.randn(3, 2, 8, requires_grad=True)
mask = torch.randn(2, 3)
out, w = m(q, k, v, need_weights=True, attn_mask=mask, average_attn_weights=False)
probe = torch.randn_like(out)
(out * probe).sum().backward()
state, grads = params_and_grads(m)
emit_case("mha_cross", state + [("q", q.detach()), ("k", k.detach()), ("v", v.detach()), ("mask", mask),
                                ("probe", probe), ("out", out.detach()), ("weights", w.detach()), ("grad.q", q.grad),
                                ("grad.k", k.grad), ("grad.v", v.grad)] + grads)

# -- TransformerEncoderLayer, pre-norm, gelu, batch_first, causal mask (dropout 0)
m = nn.TransformerEncoderLayer(8, 2, 16, 0.0, activation="gelu", batch_first=True, norm_first=True)
perturb(m)
x = torch.randn(2, 3, 8, requires_grad=True)
out = m(x, src_mask=causal(3))
probe = torch.randn_like(out)
(out * probe).sum().backward()
state, grads = params_and_grads(m)
emit_case("tel_pre_gelu", state + [("x", x.detach()), ("probe", probe), ("out", out.detach()), ("grad.x", x.grad)]
          + grads)

# -- TransformerEncoderLayer, post-norm, relu, sequence-first, key padding mask
m = nn.TransformerEncoderLayer(8, 2, 16, 0.0, activation="relu")
perturb(m)
x = torch.randn(3, 2, 8, requires_grad=True)
out = m(x, src_key_padding_mask=torch.tensor([[False, False, True], [False, False, False]]))
probe = torch.randn_like(out)
(out * probe).sum().backward()
state, grads = params_and_grads(m)
emit_case("tel_post_relu", state + [("x", x.detach()), ("probe", probe), ("out", out.detach()), ("grad.x", x.grad)]
          + grads)

# -- the character model of examples/charlm_model.h: one training step
class CharLM(nn.Module):
    def __init__(self, vocab, context, width, layers, heads, dropout):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, width),
            wpe=nn.Embedding(context, width),
            drop=nn.Dropout(dropout),
            h=nn.ModuleList([nn.TransformerEncoderLayer(width, heads, 4 * width, dropout, activation="gelu",
                                                        batch_first=True, norm_first=True) for _ in range(layers)]),
            ln_f=nn.LayerNorm(width)))
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, idx):
        t = idx.size(1)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t)))
        for block in self.transformer.h:
            x = block(x, src_mask=causal(t))
        return self.lm_head(self.transformer.ln_f(x))

model = CharLM(vocab=11, context=6, width=8, layers=2, heads=2, dropout=0.0)
perturb(model)
idx = torch.randint(0, 11, (2, 6))
targets = torch.randint(0, 11, (2, 6))
logits = model(idx)
loss = F.cross_entropy(logits.view(-1, 11), targets.view(-1))
loss.backward()
state, grads = params_and_grads(model)
total = nn.utils.clip_grad_norm_(model.parameters(), 0.5)
decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "wte" not in n and "wpe" not in n]
no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "wte" not in n and "wpe" not in n)]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=1e-2, betas=(0.9, 0.95))
opt.step()
after = [("after." + k, v.detach().clone()) for k, v in model.state_dict().items()]
emit_case("charlm_step", state + [("idx", idx.float()), ("targets", targets.float()), ("loss", loss.detach()),
                                  ("logits", logits.detach()), ("clip_total", total.detach())] + grads + after)

print("// Made by tests/transformer_expected.py from PyTorch 1.13 (/usr/bin/python3); do not edit.")
print("// /usr/bin/python3 tests/transformer_expected.py > tests/transformer_expected.h")
print("#pragma once\n\n#include <cstdint>\n#include <string>\n#include <utility>\n#include <vector>\n")
print("namespace ember::transformer_expected {\n")
print("struct Values {\n  std::vector<int64_t> shape;\n  std::vector<float> data;\n};")
print("using Case = std::vector<std::pair<std::string, Values>>;\n")
for name, items in cases:
    print("inline const Case k_%s = {" % name)
    for key, t in items:
        vals = ", ".join(repr(float(x)) for x in t.detach().float().reshape(-1).tolist())
        print('    {"%s", {{%s}, {%s}}},' % (key, ", ".join(str(s) for s in t.shape), vals))
    print("};\n")
print("}  // namespace ember::transformer_expected")
