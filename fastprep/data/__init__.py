"""Data: sources and their partitions, read as Arrow, and the in-memory table validation produces."""
