"""The rank's own process (`python -m sweeper.rank.process`): the rank, its engines
(torch.distributed, and NCCL called directly), how a point is timed, and its data. Every
module here loads torch but `preflight.py`, which the driver asks before any rank starts;
none loads Ray."""
