# Expected values for tests/test_adaptive_log_softmax.cpp, from PyTorch 1.13 (/usr/bin/python3), float64:
#   /usr/bin/python3 tests/adaptive_log_softmax_expected.py > tests/adaptive_log_softmax_expected.h
# Each case is a list of named tensors: the module's state_dict as PyTorch made it (its keys are
# the module's), the inputs and targets, forward's output and loss, log_prob, predict, and the
# gradients of loss + sum(output * probe) ("grad.<input>", "grad.<key>"; a parameter whose
# gradient PyTorch leaves None has no entry), of sum(log_prob * probe_lp) ("lp_grad.<...>") and,
# through the first gradient, of sum((d loss / d x)^2) ("gg.<...>").
import torch
import torch.nn as nn

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
cases = []


def grads(prefix, module, inputs, objective):
    names = [k for k, _ in inputs] + [k for k, _ in module.named_parameters()]
    tensors = [v for _, v in inputs] + [p for _, p in module.named_parameters()]
    got = torch.autograd.grad(objective, tensors, allow_unused=True)
    return [(prefix + k, g) for k, g in zip(names, got) if g is not None]


def forward_items(module, x, target, suffix=""):
    out = module(x, target)
    probe = torch.randn_like(out.output)
    items = [("x" + suffix, x.detach()), ("target" + suffix, target.double()), ("output" + suffix, out.output.detach()),
             ("loss" + suffix, out.loss.detach()), ("probe" + suffix, probe)]
    return items + grads("grad" + suffix + ".", module, [("x", x)], out.loss + (out.output * probe).sum())


def predict_rows(module, pool, kind):
    # Rows of `pool` whose head argmax is in the shortlist ("head"), in a cluster ("tail"), or 3 + 3 of each.
    with torch.no_grad():
        in_tail = module.head(pool).argmax(1) >= module.shortlist_size
    head, tail = pool[~in_tail], pool[in_tail]
    if kind == "head":
        return head[:4]
    if kind == "tail":
        return tail[:4]
    return torch.cat([head[:3], tail[:3]])[torch.tensor([0, 3, 1, 4, 5, 2])]


def case(name, module, x, target, extra=()):
    items = [(k, v.detach().clone()) for k, v in module.state_dict().items()]
    items += forward_items(module, x, target)
    lp = module.log_prob(x)
    probe_lp = torch.randn_like(lp)
    items += [("log_prob", lp.detach()), ("probe_lp", probe_lp), ("predict", module.predict(x).double())]
    items += grads("lp_grad.", module, [("x", x)], (lp * probe_lp).sum())
    pool = 4 * torch.randn(400, module.in_features)  # large logits: clusters win whole rows
    for kind in ("head", "tail", "mixed"):
        rows = predict_rows(module, pool, kind)
        items += [("predict_x_" + kind, rows), ("predict_" + kind, module.predict(rows).double())]
    # Double backward: the gradients of sum((d loss / d x)^2) ("gg.<...>").
    gx, = torch.autograd.grad(module(x, target).loss, [x], create_graph=True)
    items += grads("gg.", module, [("x", x)], gx.pow(2).sum())
    items += list(extra)
    cases.append((name, items))


def leaf(*shape):
    return torch.randn(*shape, requires_grad=True)


# Two clusters, div_value 2 (the reference's shapes: head (7, 8), tails (4, 8), (5, 4), (2, 8), (10, 2)).
m = nn.AdaptiveLogSoftmaxWithLoss(8, 20, [5, 10], div_value=2.0)
case("two_clusters", m, leaf(6, 8), torch.tensor([0, 7, 19, 3, 12, 9]))

# One cluster, head bias, default div_value 4 (tail hidden size 1); unbatched inputs.
m = nn.AdaptiveLogSoftmaxWithLoss(4, 6, [3], head_bias=True)
x0 = leaf(4)
unbatched = forward_items(m, x0, torch.tensor(4), "_unbatched") + forward_items(m, x0, torch.tensor(1), "_unbatched_head")
case("head_bias", m, leaf(5, 4), torch.tensor([5, 0, 3, 2, 4]), unbatched)

# Three clusters, one of them without targets (its tail gets no gradient), and a batch of one.
m = nn.AdaptiveLogSoftmaxWithLoss(16, 30, [4, 10, 20], div_value=2.0)
single = forward_items(m, leaf(1, 16), torch.tensor([25]), "_single")
case("three_clusters", m, leaf(10, 16), torch.tensor([0, 29, 5, 3, 21, 9, 1, 25, 4, 2]), single)

print("// Made by tests/adaptive_log_softmax_expected.py from PyTorch 1.13 (/usr/bin/python3); do not edit.")
print("// /usr/bin/python3 tests/adaptive_log_softmax_expected.py > tests/adaptive_log_softmax_expected.h")
print("#pragma once\n\n#include <cstdint>\n#include <string>\n#include <utility>\n#include <vector>\n")
print("namespace ember::adaptive_expected {\n")
print("struct Values {\n  std::vector<int64_t> shape;\n  std::vector<double> data;\n};")
print("using Case = std::vector<std::pair<std::string, Values>>;\n")
for name, items in cases:
    print("inline const Case k_%s = {" % name)
    for key, v in items:
        shape = ", ".join(str(s) for s in v.shape)
        data = ", ".join(repr(float(e)) for e in v.reshape(-1).tolist())
        print('    {"%s", {{%s}, {%s}}},' % (key, shape, data))
    print("};\n")
print("}  // namespace ember::adaptive_expected")
