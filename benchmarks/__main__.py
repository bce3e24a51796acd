"""``python -m benchmarks [PIPELINE.py] --rows 20000,336776 --repeat 3 [--impl NAME ...]``."""

from fastprep.bench.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
