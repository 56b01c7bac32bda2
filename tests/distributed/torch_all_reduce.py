# A PyTorch rank: joins the process group over env:// (the store its launcher serves when
# TORCHELASTIC_USE_AGENT_STORE=True) and checks a gloo all_reduce. test_torch_interop.cpp
# runs it under ember-run.
import os
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.arange(4, dtype=torch.float32) * (rank + 1)
dist.all_reduce(t)
expected = torch.arange(4, dtype=torch.float32) * sum(r + 1 for r in range(world))
if not torch.equal(t, expected):
    print(f"rank {rank}: all_reduce gave {t.tolist()}, expected {expected.tolist()}", file=sys.stderr)
    sys.exit(1)
print(f"torch rank {rank}/{world} all_reduce ok run_id={os.environ.get('TORCHELASTIC_RUN_ID', '')}")
dist.destroy_process_group()
