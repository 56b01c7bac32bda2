# Expected values of test_tf32_table.cpp's float16 / bfloat16 precision-flag tests:
# /usr/bin/python3 tests/precision_flags_expected.py (PyTorch 1.13 for the dtype roundings, numpy).
# It emulates the roundings that emulated devices emulate (Note [Matmul math] in
# src/kernels/matmul_math.h): float16 accumulation rounds the running sum to float16 after every
# multiply-add; a reduced-precision split-k reduction sums blocks of 1024 products in float32
# and rounds the running sum to the dtype after each block; without either, the float32 sum is
# rounded once.
import numpy as np
import torch

BLOCK = 1024


def to(x, dtype):
    return np.float32(torch.tensor(float(x), dtype=torch.float32).to(dtype).item())


def half_accumulated(a, b):
    acc = np.float32(0)
    for x, y in zip(a, b):
        acc = np.float32(np.float16(np.float32(acc) + np.float32(x) * np.float32(y)))
    return acc


def split_k(a, b, dtype):
    acc = np.float32(0)
    for k0 in range(0, len(a), BLOCK):
        part = np.float32(np.dot(a[k0:k0 + BLOCK].astype(np.float64), b[k0:k0 + BLOCK].astype(np.float64)))
        acc = to(np.float32(acc + part), dtype)
    return acc


def once(a, b, dtype):
    return to(np.float32(np.dot(a.astype(np.float64), b.astype(np.float64))), dtype)


# Float16AccumulationLosesSmallAddendsOnCudaDevicesOnly: ones(101) . [2048, 1, ..., 1]
a = np.ones(101, np.float32)
b = np.ones(101, np.float32)
b[0] = 2048
print("float16 accumulated:", half_accumulated(a, b), " float32 accumulated:", once(a, b, torch.float16),
      " bfloat16:", once(a, b, torch.bfloat16))

# ReducedPrecisionReductionRoundsSplitKPartialsOnCudaDevicesOnly: K = 2048
for dtype, first, second in ((torch.float16, 1025, 1024), (torch.bfloat16, 129, 128)):
    a = np.ones(2048, np.float32)
    b = np.zeros(2048, np.float32)
    b[0], b[1], b[1024] = first, second, 1
    print(dtype, "split-k reduced:", split_k(a, b, dtype), " rounded once:", once(a, b, dtype),
          " first block alone:", once(a[:BLOCK], b[:BLOCK], dtype))
