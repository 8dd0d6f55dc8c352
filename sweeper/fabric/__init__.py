"""The fabric NCCL used: its INFO lines read into records (`nccl_log`), what a node offers its
network (`node`), and the tier contract a group's transport is held to (`contract`). Loads
neither torch nor Ray: the rank reads, the driver summarises and judges."""
