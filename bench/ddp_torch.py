# The peer of bench_ddp: torch.nn.parallel.DistributedDataParallel with gloo on 2 ranks,
# timed as bench_ddp times ember (the same model, batch, steps and repetitions; best
# repetition's mean), one line per figure: "torch <0 local | 1 ddp | 2 all-reduce | 3 alone> <us>".
# The all-reduce figure uses the bucket sizes (floats) bench_ddp passes, ember's buckets.
# Run with Debian's /usr/bin/python3.
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

BATCH = 128


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def time_interleaved(steps_fns, repetitions, steps):
    best = [float("inf")] * len(steps_fns)
    for fn in steps_fns:
        for _ in range(3):
            fn()
    for _ in range(repetitions):
        for k, fn in enumerate(steps_fns):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(steps):
                fn()
            best[k] = min(best[k], (time.perf_counter() - start) / steps * 1e6)
    return best


def run(rank, port, repetitions, steps, bucket_sizes):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    torch.manual_seed(1 + rank)
    x = torch.randn(BATCH, 784)
    y = torch.randint(0, 10, (BATCH,))

    local = mlp()
    local_sgd = torch.optim.SGD(local.parameters(), lr=0.01)

    def local_step():
        local_sgd.zero_grad()
        F.cross_entropy(local(x), y).backward()
        local_sgd.step()

    ddp = nn.parallel.DistributedDataParallel(mlp())
    sgd = torch.optim.SGD(ddp.parameters(), lr=0.01)

    def ddp_step():
        sgd.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        sgd.step()

    buckets = [torch.zeros(n) for n in bucket_sizes]

    def all_reduce_step():
        works = [dist.all_reduce(b.div_(2), async_op=True) for b in buckets]
        for w in works:
            w.wait()

    t_local, t_ddp, t_all_reduce = time_interleaved([local_step, ddp_step, all_reduce_step], repetitions, steps)
    t_alone = 0.0
    for r in range(2):  # rank 0's local step while rank 1 waits
        dist.barrier()
        if r == rank:
            best = float("inf")
            for _ in range(repetitions):
                start = time.perf_counter()
                for _ in range(steps):
                    local_step()
                best = min(best, (time.perf_counter() - start) / steps * 1e6)
            if rank == 0:
                t_alone = best
    if rank == 0:
        print(f"torch 0 {t_local:.2f}\ntorch 1 {t_ddp:.2f}\ntorch 2 {t_all_reduce:.2f}\ntorch 3 {t_alone:.2f}", flush=True)
    del ddp, sgd
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    port, repetitions, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    bucket_sizes = [int(s) for s in sys.argv[4:]]
    mp.spawn(run, args=(port, repetitions, steps, bucket_sizes), nprocs=2)
