"""Storage: the one on-disk output format, shard writers, and the fitted state file (never pickle)."""
