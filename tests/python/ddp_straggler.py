"""A DDP job with one slow rank, for sonde aggregate's rank analysis on real PyTorch (issue 62):
run by torch.distributed.run with 2 processes, gloo on CPU. Usage: ddp_straggler.py OUTDIR, or
ddp_straggler.py --launch OUTDIR, which starts the two ranks itself as torchrun would (RANK,
LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and exits with the worst of their statuses.

Each rank trains a small MLP under DistributedDataParallel for 12 steps, with sonde.Profiler
(name "ddp", torch's operators folded in by sonde.torch.profile_operators, so that gloo's
collectives are on the timeline); rank 1's "forward" sleeps 30 ms more a step, so rank 0 waits
for it in the gradients' allreduce (inside its "backward"): the planted straggler is rank 1."""
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import sonde
import sonde.torch


def main(out):
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(64, 256), nn.ReLU(),
                                                  nn.Linear(256, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    cfg = dict(name="ddp", output_dir=out, formats="json", collect_gpu=False,
               collect_cpu=False, collect_memory=False, print_summary=False)
    with sonde.Profiler(cfg, from_env=False) as prof:
        sonde.torch.profile_operators(prof)
        for step in range(12):
            x = torch.randn(32, 64)
            with prof.profile("forward"):
                if rank == 1:
                    time.sleep(0.03)
                y = model(x)
            with prof.profile("backward"):
                y.sum().backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    dist.destroy_process_group()


def launch(out):
    import socket
    import subprocess
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    ranks = [subprocess.Popen([sys.executable, os.path.abspath(__file__), out],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r))) for r in (0, 1)]
    return max(p.wait() for p in ranks)


if __name__ == "__main__":
    if sys.argv[1] == "--launch":
        sys.exit(launch(sys.argv[2]))
    main(sys.argv[1])
