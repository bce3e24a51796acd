"""fastprep's benchmark suite: ``python -m benchmarks`` (the harness is ``fastprep.bench``)."""
