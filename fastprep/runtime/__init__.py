"""Runtime: run a plan on a source in memory, streamed, or on a Dask cluster, with a report."""
