"""The driver's process (the sweeper CLI): it places the rank actors (Ray), runs a schedule's
waves on them, turns what the ranks measured into typed result rows, and shows and keeps them."""
