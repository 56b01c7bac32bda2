# Expected values for tests/test_conv_nd.cpp, from PyTorch 1.13 (/usr/bin/python3), float64:
#   /usr/bin/python3 tests/conv_nd_expected.py > tests/conv_nd_expected.h
# Inputs are seq(shape, a, s) = sin(arange(numel) * a) * s (the test builds the same), and
# each case's gradients are those of sum(out * seq(out.shape, 0.13)).
import math
import textwrap
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.simplefilter('ignore')
torch.set_default_dtype(torch.float64)
print("// Made by tests/conv_nd_expected.py from PyTorch 1.13 (/usr/bin/python3); do not edit.")
print("// /usr/bin/python3 tests/conv_nd_expected.py > tests/conv_nd_expected.h")
print("#pragma once\n\n#include <vector>\n\nnamespace ember::conv_nd_expected {\n")
def seq(shape, a, s=1.0):
    n = math.prod(shape)
    return (torch.sin(torch.arange(n, dtype=torch.float64) * a) * s).reshape(shape)
def fmt(name, t):
    vals = ", ".join("%.10g" % v for v in t.detach().flatten().tolist())
    body = textwrap.fill(vals, width=114, initial_indent="    ", subsequent_indent="    ")
    print(f"const std::vector<double> {name} = {{\n{body}}};")
def case(tag, fn, xs, ws, bs=None, **kw):
    x = seq(xs, 0.37).requires_grad_(); w = seq(ws, 0.23, 0.5).requires_grad_()
    b = seq([bs], 0.71, 0.3).requires_grad_() if bs else None
    out = fn(x, w, b, **kw)
    go = seq(list(out.shape), 0.13)
    (out * go).sum().backward()
    print(f"// {tag}: out {list(out.shape)}")
    fmt(tag + "_out", out); fmt(tag + "_gx", x.grad); fmt(tag + "_gw", w.grad)
    if b is not None: fmt(tag + "_gb", b.grad)
case("c1", F.conv1d, [2, 4, 7], [6, 2, 3], 6, stride=2, padding=1, dilation=2, groups=2)
case("c3", F.conv3d, [1, 2, 3, 4, 3], [3, 2, 2, 2, 2], 3, stride=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 2))
case("c3g", F.conv3d, [1, 2, 2, 3, 3], [2, 1, 1, 2, 3], None, stride=1, padding=(0, 1, 1), groups=2)
case("s1", F.conv1d, [1, 2, 6], [3, 2, 4], 3, padding='same')
case("s2", F.conv2d, [1, 2, 5, 4], [2, 2, 2, 3], None, padding='same', dilation=(1, 2))
case("s3", F.conv3d, [1, 1, 3, 4, 3], [2, 1, 2, 3, 2], 2, padding='same')
case("v1", F.conv1d, [2, 2, 6], [3, 2, 4], 3, padding='valid')
# padding modes through the modules, weights set explicitly
for mode in ["reflect", "replicate", "circular"]:
    m = nn.Conv1d(2, 2, 3, padding=2, padding_mode=mode)
    with torch.no_grad():
        m.weight.copy_(seq([2, 2, 3], 0.23, 0.5)); m.bias.copy_(seq([2], 0.71, 0.3))
    x = seq([1, 2, 5], 0.37).requires_grad_()
    out = m(x); (out * seq(list(out.shape), 0.13)).sum().backward()
    print(f"// m1_{mode}: out {list(out.shape)}"); fmt(f"m1_{mode}_out", out); fmt(f"m1_{mode}_gx", x.grad)
    m = nn.Conv2d(1, 2, (2, 3), padding=(1, 2), padding_mode=mode, bias=False)
    with torch.no_grad(): m.weight.copy_(seq([2, 1, 2, 3], 0.23, 0.5))
    x = seq([1, 1, 3, 4], 0.37).requires_grad_()
    out = m(x); (out * seq(list(out.shape), 0.13)).sum().backward()
    print(f"// m2_{mode}: out {list(out.shape)}"); fmt(f"m2_{mode}_out", out); fmt(f"m2_{mode}_gx", x.grad)
m = nn.Conv3d(1, 1, (2, 2, 3), padding='same', padding_mode='circular', bias=False)
with torch.no_grad(): m.weight.copy_(seq([1, 1, 2, 2, 3], 0.23, 0.5))
x = seq([1, 1, 3, 3, 4], 0.37)
out = m(x); print(f"// m3_same_circular: out {list(out.shape)}"); fmt("m3_out", out)
# unbatched
x = seq([4, 7], 0.37); w = seq([6, 2, 3], 0.23, 0.5)
fmt("u1_out", F.conv1d(x, w, None, 2, 1, 2, 2))
# transposed convolutions
case("t1", F.conv_transpose1d, [2, 4, 5], [4, 3, 3], 6, stride=2, padding=1, output_padding=1, groups=2)
case("t2", F.conv_transpose2d, [1, 2, 3, 4], [2, 3, 2, 3], 3, stride=(2, 1), padding=(0, 1), output_padding=(1, 0),
     dilation=(1, 2))
case("t3", F.conv_transpose3d, [1, 2, 2, 3, 2], [2, 2, 2, 2, 3], None, stride=(1, 2, 2), padding=(1, 0, 1),
     output_padding=(0, 1, 0))
case("t2d", F.conv_transpose2d, [1, 1, 3, 3], [1, 1, 2, 2], None, stride=1, output_padding=1, dilation=2)
m = nn.ConvTranspose2d(2, 4, 3, stride=2, padding=1)
with torch.no_grad():
    m.weight.copy_(seq([2, 4, 3, 3], 0.23, 0.5)); m.bias.copy_(seq([4], 0.71, 0.3))
out = m(seq([1, 2, 5, 5], 0.37), output_size=[10, 10])
print(f"// mt2: out {list(out.shape)}"); fmt("mt2_out", out)
print("\n}  // namespace ember::conv_nd_expected")
