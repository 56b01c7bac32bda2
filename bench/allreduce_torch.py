# The peer of bench_allreduce: torch.distributed's gloo all_reduce on 2 ranks, timed the
# same way (same sizes, iterations and repetitions; best repetition's mean), one line
# per size: "torch <bytes> <microseconds>". Run with Debian's /usr/bin/python3.
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def iterations(nbytes):
    return max(5, min(200, (16 << 20) // nbytes))


def run(rank, port, sizes, repetitions):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    for nbytes in sizes:
        t = torch.zeros(nbytes // 4, dtype=torch.float32)
        n = iterations(nbytes)
        for _ in range(3):
            dist.all_reduce(t)
        best = float("inf")
        for _ in range(repetitions):
            dist.barrier()
            start = time.perf_counter()
            for _ in range(n):
                dist.all_reduce(t)
            best = min(best, (time.perf_counter() - start) / n)
        if rank == 0:
            print(f"torch {nbytes} {best * 1e6:.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    port = int(sys.argv[1])
    repetitions = int(sys.argv[2])
    sizes = [int(s) for s in sys.argv[3:]]
    mp.spawn(run, args=(port, sizes, repetitions), nprocs=2)
