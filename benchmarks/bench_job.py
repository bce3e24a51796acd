"""The whole job, as users run it, timed as fresh processes (see fastprep/bench/job.py).

    python benchmarks/bench_job.py --rows 336776,3367760 --repeat 5

fastprep's CLI, a Polars script and a pandas + scikit-learn script (benchmarks/job_scripts/)
each read the Parquet file and write X and y; outputs are checked equal before timing.
Prints the table, writes benchmarks/results/job_results.{md,json} and the
"Whole job (fresh processes)" section of benchmarks/RESULTS.md.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's fastprep

from fastprep.bench.job_cli import main

if __name__ == "__main__":
    raise SystemExit(main())
