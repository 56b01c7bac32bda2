# The peer of bench_allreduce: torch.distributed's gloo all_reduce on 2 ranks, timed the
# same way (same sizes and iteration counts, each call timed on its own), one line per
# size from rank 0: "torch <bytes> <microseconds per call>...". Run with Debian's
# /usr/bin/python3.
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def iterations(nbytes):
    return max(10, min(400, (64 << 20) // nbytes))


def run(rank, port, sizes):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    for nbytes in sizes:
        t = torch.zeros(nbytes // 4, dtype=torch.float32)
        for _ in range(5):
            dist.all_reduce(t)
        dist.barrier()
        samples = []
        for _ in range(iterations(nbytes)):
            start = time.perf_counter()
            dist.all_reduce(t)
            samples.append((time.perf_counter() - start) * 1e6)
        if rank == 0:
            print(f"torch {nbytes} " + " ".join(f"{s:.1f}" for s in samples), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    port = int(sys.argv[1])
    sizes = [int(s) for s in sys.argv[2:]]
    mp.spawn(run, args=(port, sizes), nprocs=2)
