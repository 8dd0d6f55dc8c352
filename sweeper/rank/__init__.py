"""The rank's own process: forked by its node's template (`template.py`, which has imported
torch once for them all) or started fresh (`python -m sweeper.rank.process`), it serves the
rank (`worker.Rank`): its engines (torch.distributed, and NCCL called directly), how a point
is timed, and its data. Every module here loads torch but `preflight.py` and `engines.py`,
which the driver asks before any rank starts, and `process.py` and `template.py`, which the
actor imports to reach its rank; none loads Ray."""
