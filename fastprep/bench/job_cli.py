"""Command line of the whole-job benchmark: ``python benchmarks/bench_job.py`` and
``fastprep bench --job``.

python benchmarks/bench_job.py [--rows 336776,3367760] [--repeat 5] [--cold-repeat 3]
    [--no-sample] [--via module|script] [--only fastprep polars pandas+sklearn]
    [--output benchmarks/results] [--results-md benchmarks/RESULTS.md | --no-results-md]
    [--note TEXT]
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from fastprep.bench.job import FASTPREP, PANDAS, POLARS, ROOT, SAMPLE, JobConfig

DEFAULT_RESULTS_MD = str(ROOT / "benchmarks" / "RESULTS.md")


def _rows(text: str) -> list[int | str]:
    rows: list[int | str] = []
    for part in (p.strip() for p in text.split(",")):
        if part == SAMPLE:
            rows.append(SAMPLE)
        elif part:
            try:
                rows.append(int(part.replace("_", "")))
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"--rows {text!r}: use integers like 336776,3367760 (or 'sample')"
                ) from None
    if not rows or any(isinstance(r, int) and r < 1 for r in rows):
        raise argparse.ArgumentTypeError(f"--rows {text!r}: need positive sizes")
    return rows


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python benchmarks/bench_job.py",
        description="The whole job (Parquet in, X and y on disk) as fresh processes: "
        "fastprep run vs a Polars script vs a pandas + scikit-learn script.",
    )
    p.add_argument("--pipeline", default=str(ROOT / "pipelines" / "flights.py"),
                   help="the pipeline file fastprep runs (the scripts implement flights.py)")  # fmt: skip
    p.add_argument("--rows", type=_rows, default=[336_776, 3_367_760],
                   help="comma-separated sizes of the flights table (default: 336776,3367760); "
                   "the bundled sample is added unless --no-sample")  # fmt: skip
    p.add_argument("--repeat", type=int, default=5, help="alternated timed rounds (default: 5)")
    p.add_argument("--cold-repeat", type=int, default=3,
                   help="cold first runs of fastprep on the bundled sample (default: 3)")  # fmt: skip
    p.add_argument("--no-sample", action="store_true",
                   help="skip the bundled sample (so the cold runs) and the start-up probes")  # fmt: skip
    p.add_argument(
        "--via",
        choices=["module", "script"],
        default="module",
        help="start fastprep as 'python -m fastprep' (default) or the console script",
    )
    p.add_argument(
        "--only",
        nargs="+",
        choices=[FASTPREP, POLARS, PANDAS],
        help="only these competitors (fastprep is always kept: it is the reference)",
    )
    p.add_argument("--data-dir", default=str(ROOT / "benchmarks" / "results" / "data"),
                   help="cache of the generated Parquet files")  # fmt: skip
    p.add_argument("--output", "-o", default=str(ROOT / "benchmarks" / "results"),
                   help="folder for job_results.json/.md")  # fmt: skip
    p.add_argument("--results-md", default=DEFAULT_RESULTS_MD,
                   help="update this file's 'Whole job (fresh processes)' section")  # fmt: skip
    p.add_argument("--no-results-md", action="store_true", help="leave RESULTS.md alone")
    p.add_argument("--note", default="", help="a line printed above the tables")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per job")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-warm-kernels", action="store_true",
                   help="no untimed forced-Numba run before each size's gate: the timed runs "
                   "find the kernel cache as the earlier runs left it")  # fmt: skip
    return p


def config_from(args: argparse.Namespace) -> JobConfig:
    rows = list(dict.fromkeys(args.rows if args.no_sample else [SAMPLE, *args.rows]))
    if args.no_sample:
        rows = [r for r in rows if r != SAMPLE]
    competitors = [FASTPREP, POLARS, PANDAS]
    if args.only:
        competitors = [c for c in competitors if c == FASTPREP or c in args.only]
    return JobConfig(
        pipeline=args.pipeline, rows=rows, repeat=max(args.repeat, 1),
        cold_repeat=max(args.cold_repeat, 0), competitors=competitors, data_dir=args.data_dir,
        via=args.via, timeout=args.timeout, progress=not args.no_progress,
        startup_probes=not args.no_sample, warm_kernels=not args.no_warm_kernels,
    )  # fmt: skip


def execute(config: JobConfig, output: str, results_md: str | None, note: str,
            command_line: str) -> int:  # fmt: skip
    """Run, print the Markdown, write the files; exit code 1 if a gate or a run failed."""
    from fastprep.bench import job, job_report

    results = job.run(config, command_line)
    paths = job_report.write_all(results, output, results_md, note)
    print(job_report.markdown(results, note))
    print("wrote " + ", ".join(str(p) for p in paths.values()), file=sys.stderr)
    problems = job.failed(results)
    for problem in problems:
        print(f"bench_job: {problem}", file=sys.stderr)
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(words)
    return execute(
        config_from(args), args.output, None if args.no_results_md else args.results_md,
        args.note, shlex.join(["python", "benchmarks/bench_job.py", *words]),
    )  # fmt: skip


def from_bench_args(args: Any, command_line: str) -> int:
    """``fastprep bench --job``: the bench command's --rows/--repeat/--output/--cache-dir;
    results go to --output only (benchmarks/bench_job.py also updates RESULTS.md)."""
    config = JobConfig(
        pipeline=args.pipeline, rows=[SAMPLE, *args.rows], repeat=max(args.repeat, 1),
        data_dir=args.cache_dir, progress=not args.no_progress,
    )  # fmt: skip
    return execute(config, args.output, None, "", command_line)
