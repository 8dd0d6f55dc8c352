"""Algorithm variants built from send/recv (and torch symmetric memory), and experiments
such as a mixture-of-experts all-to-all-v: the descriptors `registry.py` registers."""
