"""What each CLI command does, a module per command; `sweeper/cli.py` declares them."""
