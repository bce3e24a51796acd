"""``fastprep bench`` / ``python -m benchmarks``: the same options, one entry point.

fastprep bench [PIPELINE.py] [--rows 20000,336776,3367760] [--repeat 3]
               [--output benchmarks/results] [--impl NAME ...]
fastprep bench --job [--rows 336776,3367760] [--repeat 5]   (whole job, fresh processes)
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from typing import Any

DEFAULT_PIPELINE = "pipelines/flights.py"


def _rows(text: str) -> list[int]:
    try:
        rows = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--rows {text!r}: use integers like 20000,336776"
        ) from None
    if not rows or min(rows) < 1:
        raise argparse.ArgumentTypeError(f"--rows {text!r}: need at least one positive size")
    return rows


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the benchmark's options to ``parser``."""
    parser.add_argument("pipeline", nargs="?", default=DEFAULT_PIPELINE,
                        help=f"pipeline file (default: {DEFAULT_PIPELINE})")  # fmt: skip
    parser.add_argument("--rows", type=_rows, default=[20_000, 336_776, 3_367_760],
                        help="comma-separated sizes (default: 20000,336776,3367760)")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (default: 3)")
    parser.add_argument("--output", "-o", default="benchmarks/results",
                        help="folder for results.md/.json/.png (default: benchmarks/results)")  # fmt: skip
    parser.add_argument("--impl", nargs="+", metavar="NAME",
                        help="only these implementations (see --list)")  # fmt: skip
    parser.add_argument("--list", action="store_true", help="list implementations and exit")
    parser.add_argument("--naive-sample", type=int, default=20_000,
                        help="above this many rows, time naive pandas on this many and "
                        "extrapolate per row (default: 20000)")  # fmt: skip
    parser.add_argument("--cache-dir", default="benchmarks/.cache", help="generated data cache")
    parser.add_argument("--isolation", choices=["process", "inline"], default="process",
                        help="process (default): every sample in a fresh process; inline: in "
                        "this process (quick smoke runs; cold/peak less meaningful)")  # fmt: skip
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--job", action="store_true",
                        help="time the whole job instead (fresh processes, Parquet in, X and y "
                        "on disk; see benchmarks/bench_job.py for all its options)")  # fmt: skip
    return parser


def handle(args: argparse.Namespace, argv: Sequence[str] | None = None) -> int:
    """Run the benchmark from parsed options; returns the exit code (1 if a gate failed)."""
    from fastprep.bench import harness, impls, report

    command = "fastprep " + shlex.join(sys.argv[1:]) if argv is None else shlex.join(argv)
    if args.job:
        from fastprep.bench.job_cli import from_bench_args

        return from_bench_args(args, command)
    if args.list:
        elsewhere = [
            f"{name} (not a competitor here: --impl {name} says where)" for name in impls.ELSEWHERE
        ]
        print("\n".join([*impls.all_names(), *elsewhere]))
        return 0
    try:
        for name in args.impl or []:
            impls.get(name)
    except (KeyError, NotImplementedError) as exc:
        print(f"fastprep bench: error: {exc.args[0]}", file=sys.stderr)
        return 2
    config = harness.Config(
        pipeline=args.pipeline, rows=args.rows, repeat=max(args.repeat, 1), impls=args.impl,
        output=args.output, cache_dir=args.cache_dir, naive_sample=args.naive_sample,
        progress=not args.no_progress, isolation=args.isolation,
    )  # fmt: skip
    results = harness.run(config, command=command)
    paths = report.write_all(results, config.output)
    print(report.markdown(results))
    print("wrote " + ", ".join(str(p) for p in paths.values()), file=sys.stderr)
    failed = [n for s in results["sizes"] for n, e in s["impls"].items() if not e["gate"]["ok"]]
    return 1 if failed else 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``bench`` on an argparse subparsers object (``handler=`` set)."""
    parser = subparsers.add_parser(
        "bench", help="benchmark fastprep against pandas, sklearn, Polars"
    )
    configure(parser)
    parser.set_defaults(handler=handle)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "python -m benchmarks") -> int:
    """Standalone entry point (``python -m benchmarks``)."""
    parser = configure(argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0]))
    words = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(words)
    return handle(args, [*prog.split(), *words])
