"""Records NCCL's own INFO output for a few collectives on every GPU of this host, one
process per GPU, under whatever NCCL_* variables the caller set (NVLS stays off)."""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def work(rank: int, world: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank)
    )
    for n in (256, 2**18, 2**24):
        x = torch.ones(n, device="cuda", dtype=torch.float32)
        dist.all_reduce(x)
    y = torch.empty(world * 2**20, device="cuda", dtype=torch.bfloat16)
    dist.all_gather_into_tensor(y, torch.ones(2**20, device="cuda", dtype=torch.bfloat16))
    a = torch.ones(world * 2**18, device="cuda")
    b = torch.empty_like(a)
    dist.all_to_all_single(b, a)
    z = torch.ones(2**18, device="cuda")
    if rank % 2 == 0:
        dist.send(z, rank + 1)
    else:
        dist.recv(z, rank - 1)
    torch.cuda.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    world = torch.cuda.device_count()
    mp.spawn(work, args=(world, int(sys.argv[1])), nprocs=world)
