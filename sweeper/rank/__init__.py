"""The rank's own process (`python -m sweeper.host`): the rank, its engines (torch.distributed
and NCCL called directly), how points are timed, and their data. Only this process loads
torch's collectives; it loads no Ray."""
