"""The rank's own process: what runs where torch runs, with no Ray in it."""
