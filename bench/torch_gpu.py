#!/usr/bin/env python3
"""PyTorch's side of the GPU benchmarks: the ops bench_ops/bench_fft/bench_allocator/
bench_runtime time in ember, timed here with torch.cuda events on the same GPU, in the
same gpu-run. Prints one line per op: name, microseconds per iteration (median of 5 runs).
scripts/gpu-run runs it; the ember/PyTorch ratios are read side by side from its report.
Not yet run on a GPU."""
import statistics
import sys

try:
    import torch
except ImportError:
    sys.exit("torch_gpu.py: PyTorch is not installed")
if not torch.cuda.is_available():
    sys.exit("torch_gpu.py: no CUDA device")

dev = torch.device("cuda:0")


def time_us(fn, iters=100, warmup=10):
    """Median over 5 runs of the per-iteration time, measured with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        runs.append(start.elapsed_time(end) * 1000.0 / iters)
    return statistics.median(runs)


def report(name, us, extra=""):
    print(f"torch {name:32s} {us:12.2f} us {extra}", flush=True)


small_a, small_b = torch.ones(16, device=dev), torch.ones(16, device=dev)
report("small_add", time_us(lambda: small_a + small_b, iters=1000))

n = 1 << 24
a, b = torch.rand(n, device=dev), torch.rand(n, device=dev)
us = time_us(lambda: a + b)
report("large_add/16777216", us, f"{3 * 4 * n / (us * 1e-6) / 1e9:.1f} GB/s")
report("large_sum/16777216", time_us(lambda: a.sum()))

m1, m2 = torch.rand(1024, 1024, device=dev), torch.rand(1024, 1024, device=dev)
for tf32 in (False, True):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    us = time_us(lambda: m1 @ m2)
    report(f"matmul/1024 tf32={'on' if tf32 else 'off'}", us, f"{2 * 1024 ** 3 / (us * 1e-6) / 1e12:.2f} TFLOP/s")
torch.backends.cuda.matmul.allow_tf32 = False

x = torch.rand(64, 4096, device=dev)
report("fft_rfft/64x4096 (plan cached)", time_us(lambda: torch.fft.rfft(x)))

report("allocator malloc+free 1MiB", time_us(lambda: torch.empty(1 << 18, device=dev), iters=1000))


def event_round_trip():
    e = torch.cuda.Event()
    e.record()
    e.synchronize()


report("event record+synchronize", time_us(event_round_trip, iters=1000))

chain = torch.rand(1024, device=dev, requires_grad=True)


def autograd_chain():
    y = chain
    for _ in range(100):
        y = y * 1.0001
    y.sum().backward()


report("autograd chain 100 ops", time_us(autograd_chain, iters=10))
