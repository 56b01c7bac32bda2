#!/usr/bin/env python3
"""PyTorch's side of the GPU benchmarks: the cases bench_gpu times in ember, under the same
names, shapes, dtypes, models and protocol, on cuda:0 in the same gpu-run; bench/gpu_ratios.py
reads both outputs and prints ember / PyTorch per case.

    python3 bench/torch_gpu.py [--device cuda|cpu] [--only NAME[,NAME...]]

Protocol (bench_gpu's): `warmup` calls, synchronize, then 5 runs of `iters` calls each
between two CUDA events recorded on the current stream; the median of the 5 per-call times.
One line per case: `torch <name> <us> us [extra]`, `torch <name> failed: <error>` or
`torch <name> skipped: <why>`. small_add_host is the wall clock per call (launch overhead).

--device cpu is a dry run of this script where there is no GPU (PyTorch 1.13 here): CUDA
events do not exist there, so every case is timed with the wall clock, the iteration counts
are divided by 10 (at least 3), the cases that need CUDA streams, events or graphs are
skipped, and every line says "[cpu wall clock]": not GPU numbers."""
import argparse
import statistics
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    sys.exit("torch_gpu.py: PyTorch is not installed")

from charlm_torch_model import CharLM  # bench/, beside this script
from train_torch_model import TrainCnn

p = argparse.ArgumentParser()
p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
p.add_argument("--only", default="", help="comma-separated case names")
args = p.parse_args()
ON_GPU = args.device == "cuda"
if ON_GPU and not torch.cuda.is_available():
    sys.exit("torch_gpu.py: no CUDA device (--device cpu runs a dry run of the script)")
dev = torch.device("cuda:0" if ON_GPU else "cpu")
ONLY = set(filter(None, args.only.split(",")))
DIVISOR = 1 if ON_GPU else 10
failures = 0
seen = set()  # every case name, to reject unknown --only names


def sync():
    if ON_GPU:
        torch.cuda.synchronize()


def median_us(fn, iters, warmup, one_run):
    """Warm-up calls, then the median of 5 one_run(iters) results (microseconds per call)."""
    iters = max(3, iters // DIVISOR)
    for _ in range(warmup):
        fn()
    sync()
    return statistics.median(one_run(iters) for _ in range(5))


def time_us(fn, iters=100, warmup=10):
    """Microseconds per call: median of 5 runs of `iters` calls, timed with CUDA events
    (the wall clock with --device cpu)."""
    def one_run(n):
        if not ON_GPU:
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            return (time.perf_counter() - t0) * 1e6 / n
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / n
    return median_us(fn, iters, warmup, one_run)


def host_us(fn, iters=1000, warmup=10):
    """The issuing thread's wall time per call (the queue drained after each run, untimed)."""
    def one_run(n):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        sync()
        return (t1 - t0) * 1e6 / n
    return median_us(fn, iters, warmup, one_run)


def case(name, needs_gpu=False):
    """Runs the decorated body (which returns (us, extra)) unless --only excludes it."""
    def run(body):
        global failures
        seen.add(name)
        if ONLY and name not in ONLY:
            return body
        if needs_gpu and not ON_GPU:
            print(f"torch {name:32s} skipped: needs a CUDA device", flush=True)
            return body
        try:
            us, extra = body()
            label = "" if ON_GPU else " [cpu wall clock]"
            print(f"torch {name:32s} {us:12.2f} us {extra}{label}", flush=True)
        except Exception as e:  # one failed case must not hide the others
            failures += 1
            print(f"torch {name:32s} failed: {type(e).__name__}: {e}".replace("\n", " "), flush=True)
        return body
    return run


def gbps(nbytes, us):
    return nbytes / (us * 1e-6) / 1e9


print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(0) if ON_GPU else 'cpu'}, "
      f"timer: {'CUDA events' if ON_GPU else 'wall clock (dry run: not GPU numbers)'}", flush=True)
copy_gbps = [0.0]
N = 1 << 24


@case("copy_d2d/64MiB")
def _():
    n = 16 << 20  # 64 MiB of float32
    src, dst = torch.rand(n, device=dev), torch.empty(n, device=dev)
    us = time_us(lambda: dst.copy_(src))
    copy_gbps[0] = gbps(2 * 4 * n, us)
    return us, f"{copy_gbps[0]:.1f} GB/s"


@case("large_add/16777216")
def _():
    a, b = torch.rand(N, device=dev), torch.rand(N, device=dev)
    us = time_us(lambda: a + b)
    bw = gbps(3 * 4 * N, us)
    return us, f"{bw:.1f} GB/s" + (f" {100 * bw / copy_gbps[0]:.1f}% of copy" if copy_gbps[0] else "")


@case("small_add")
def _():
    a, b = torch.ones(16, device=dev), torch.ones(16, device=dev)
    return time_us(lambda: a + b, iters=1000), ""


@case("small_add_host")
def _():
    a, b = torch.ones(16, device=dev), torch.ones(16, device=dev)
    return host_us(lambda: a + b), "wall clock per enqueue"


@case("large_sum/16777216")
def _():
    a = torch.rand(N, device=dev)
    us = time_us(lambda: a.sum())
    return us, f"{gbps(4 * N, us):.1f} GB/s"


@case("softmax/64x784")
def _():
    x = torch.randn(64, 784, device=dev)
    return time_us(lambda: x.softmax(1)), ""


def matmul_case(tf32):
    @case(f"matmul/1024/tf32_{'on' if tf32 else 'off'}")
    def _():
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            m1, m2 = torch.rand(1024, 1024, device=dev), torch.rand(1024, 1024, device=dev)
            us = time_us(lambda: m1 @ m2)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch's default
        return us, f"{2 * 1024 ** 3 / (us * 1e-6) / 1e12:.2f} TFLOP/s"


matmul_case(False)
matmul_case(True)


@case("rfft/64x4096_plan_cached")
def _():
    x = torch.rand(64, 4096, device=dev)
    return time_us(lambda: torch.fft.rfft(x)), ""  # warm-up calls fill the plan cache


@case("allocator_malloc_free/1MiB")
def _():
    return time_us(lambda: torch.empty(1 << 18, device=dev), iters=1000), ""


@case("event_record_sync", needs_gpu=True)
def _():
    def round_trip():
        e = torch.cuda.Event()
        e.record()
        e.synchronize()
    return time_us(round_trip, iters=1000), ""


@case("stream_wait_event", needs_gpu=True)
def _():
    side = torch.cuda.Stream()

    def round_trip():
        there, back = torch.cuda.Event(), torch.cuda.Event()
        there.record()
        side.wait_event(there)
        back.record(side)
        back.synchronize()
    return time_us(round_trip, iters=1000), "record, side stream waits, record there, synchronize"


@case("autograd_chain/100")
def _():
    leaf = torch.rand(1024, device=dev, requires_grad=True)

    def chain():
        y = leaf
        for _ in range(100):
            y = y * 1.0001
        y.sum().backward()
    return time_us(chain, iters=10), "forward + backward"


def make_mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def classifier_step(net, capturable=False, amp=False, batch=64):
    """zero_grad, forward, cross-entropy, backward, Adam(1e-3) on a batch of 28x28 images.
    With amp, the mixed-precision recipe: forward and loss under autocast (float16 on a GPU;
    the cpu dry run has bfloat16 and no scaler, as PyTorch 1.13's cpu autocast), the loss
    scaled by a GradScaler whose step unscales, checks and steps Adam."""
    net.to(dev)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, **({"capturable": True} if capturable else {}))
    x = torch.rand(batch, 1, 28, 28, device=dev)
    y = (torch.arange(batch) % 10).to(dev)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(net(x), y).backward()
        opt.step()

    if not amp:
        return step
    scaler = None
    if ON_GPU:  # torch.amp.GradScaler from PyTorch 2.3; torch.cuda.amp's is deprecated there
        scaler = torch.amp.GradScaler("cuda") if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()
    amp_dtype = torch.float16 if ON_GPU else torch.bfloat16

    def amp_step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=amp_dtype):
            loss = F.cross_entropy(net(x), y)
        if scaler is None:
            loss.backward()
            opt.step()
            return
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return amp_step


# PyTorch's defaults for the training steps (bench_gpu sets the same).
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = True


@case("cnn_step/64")
def _():
    torch.manual_seed(0)
    return time_us(classifier_step(TrainCnn()), iters=20, warmup=5), "examples/train's CNN, Adam"


@case("cnn_step_amp/64")
def _():
    torch.manual_seed(0)
    return (time_us(classifier_step(TrainCnn(), amp=True), iters=20, warmup=5),
            "cnn_step/64 under autocast float16, GradScaler")


# The same steps at batch 1024, where a GPU's time goes to arithmetic rather than launches.
@case("cnn_step/1024")
def _():
    torch.manual_seed(0)
    return time_us(classifier_step(TrainCnn(), batch=1024), iters=20, warmup=5), "examples/train's CNN, Adam, batch 1024"


@case("cnn_step_amp/1024")
def _():
    torch.manual_seed(0)
    return (time_us(classifier_step(TrainCnn(), amp=True, batch=1024), iters=20, warmup=5),
            "cnn_step/1024 under autocast float16, GradScaler")


@case("mlp_step/64")
def _():
    torch.manual_seed(0)
    return time_us(classifier_step(make_mlp()), iters=50, warmup=5), "784-256-128-10, Adam"


@case("mlp_step_graph/64", needs_gpu=True)
def _():
    torch.manual_seed(0)
    step = classifier_step(make_mlp(), capturable=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # the optimizer's state exists before capture
            step()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    return time_us(g.replay, iters=50, warmup=5), "CUDA graph replay of the step, Adam capturable"


@case("transformer_step/8x128")
def _():
    torch.manual_seed(0)
    net = CharLM(96).to(dev)
    named = list(net.named_parameters())
    is_decay = [p.dim() >= 2 and "wte" not in n and "wpe" not in n for n, p in named]
    opt = torch.optim.AdamW([{"params": [p for (_, p), d in zip(named, is_decay) if d], "weight_decay": 0.1},
                             {"params": [p for (_, p), d in zip(named, is_decay) if not d], "weight_decay": 0.0}],
                            lr=1e-3)
    x = (torch.rand(8, 128, device=dev) * 96).long()
    y = (torch.rand(8, 128, device=dev) * 96).long()

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(net(x).reshape(-1, 96), y.reshape(-1)).backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
    return time_us(step, iters=10, warmup=3), "examples/charlm's model, AdamW, clip 1.0"


# The other modules of the spec's TF32 list, each one forward and backward (gradients of the
# input and the parameters) of a loss that is the output's mean.
@case("lstm_step/35x20x200")
def _():
    torch.manual_seed(0)
    lstm = nn.LSTM(200, 200, num_layers=2).to(dev)
    sgd = torch.optim.SGD(lstm.parameters(), lr=0.1)
    x = torch.randn(35, 20, 200, device=dev)

    def step():
        sgd.zero_grad(set_to_none=True)
        out, _ = lstm(x)
        (out * out).mean().backward()
        sgd.step()
    return time_us(step, iters=20, warmup=3), "2-layer LSTM 200, sequence 35, batch 20, SGD"


@case("conv1d/32x64x1024_k5")
def _():
    torch.manual_seed(0)
    conv = nn.Conv1d(64, 128, 5, padding=2).to(dev)
    x = torch.randn(32, 64, 1024, device=dev, requires_grad=True)
    return time_us(lambda: conv(x).mean().backward(), iters=20, warmup=3), \
        "64 -> 128 channels, padding 2, forward + backward"


@case("conv3d/4x16x16x32x32_k3")
def _():
    torch.manual_seed(0)
    conv = nn.Conv3d(16, 16, 3, padding=1).to(dev)
    x = torch.randn(4, 16, 16, 32, 32, device=dev, requires_grad=True)
    return time_us(lambda: conv(x).mean().backward(), iters=20, warmup=3), \
        "16 -> 16 channels, padding 1, forward + backward"


@case("grid_sample/32x16x64x64")
def _():
    torch.manual_seed(0)
    x = torch.randn(32, 16, 64, 64, device=dev, requires_grad=True)
    # A small rotation and shift per image.
    theta = (torch.tensor([[0.98, -0.17, 0.05], [0.17, 0.98, -0.03]]) + 0.01 * torch.randn(32, 2, 3)) \
        .to(dev).requires_grad_()

    def step():
        grid = F.affine_grid(theta, [32, 16, 64, 64], align_corners=False)
        F.grid_sample(x, grid, align_corners=False).mean().backward()
    return time_us(step, iters=20, warmup=3), "affine_grid + bilinear grid_sample, forward + backward"


if ONLY - seen:
    sys.exit(f"torch_gpu.py: --only: no case named {', '.join(sorted(ONLY - seen))}")
sys.exit(1 if failures else 0)
