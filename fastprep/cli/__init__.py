"""``fastprep`` command line: run a pipeline file, or apply a saved fitted pipeline.

    fastprep run pipelines/flights.py [--input SRC] [--output out/] [--backend auto]
    fastprep run pipelines/flights.py --input data/*.parquet --scheduler tcp://host:8786
    fastprep transform out/pipeline.fastprep --input SRC [--output out2/]
    fastprep explain pipelines/flights.py [--input SRC] [--stage logical|optimized]
    fastprep bench pipelines/flights.py --rows 20000,336776,3367760
    fastprep validate pipelines/flights.py --input SRC   (exit 1 if a raise rule fails)

Without ``--input``, ``run``, ``explain`` and ``validate`` use the pipeline file's
``sample=`` (a relative path is relative to the pipeline file); ``transform`` always needs
``--input``. ``transform`` without ``--output`` writes to a new folder next to the state
(``<state folder>/transform-<input>-<n>/``) and never into the folder holding the state:
that is the training run's output.

Errors fastprep raises on purpose, bad arguments and the file system's refusals (an
``--output`` that is a file, no space, no permission) print as one line
``fastprep: error: ...`` (exit code 2), never a traceback; ``--debug`` shows the traceback.
A closed stdout (``fastprep explain ... | head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import re
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from fastprep.backends.registry import available as available_backends
from fastprep.data.pandas_objects import arrow_without_pandas
from fastprep.errors import FastprepError, FindingWarning, PipelineDefinitionError
from fastprep.pipeline import FittedPipeline, Pipeline, load, load_pipeline_file
from fastprep.runtime.execute import Output
from fastprep.storage.output_format import check_folder
from fastprep.storage.shards import OpenedOutput

STATE_FILE = "pipeline.fastprep"
#: what ``--backend`` accepts: the planner's choice, or one registered backend
BACKENDS = ("auto", *sorted(available_backends(), key=lambda name: (name != "pandas", name)))
#: ``--out-dtype`` of ``run``: int8/uint8 need a calibrated quantization, which a fresh fit
#: does not have (``transform`` offers them for a state that has one)
FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")
QUANTIZED_DTYPES = ("int8", "uint8")
#: shell convention for a command ended by SIGPIPE (128 + 13)
EXIT_BROKEN_PIPE = 141
#: shell convention for a command ended by SIGINT (128 + 2)
EXIT_INTERRUPTED = 130


class _UsageError(Exception):
    """A bad command line (argparse's error), reported like any other error."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{message} (see '{self.prog} --help')")


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _parser(_command_named(argv))
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        print(f"fastprep: error: {exc}", file=sys.stderr)
        return 2
    if args.command is None:
        parser.print_help()
        return 2
    # the report printed below lists every finding: not a second time as a warning
    warnings.filterwarnings("ignore", category=FindingWarning)
    try:
        code = args.handler(args)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        # the reader went away (``| head``): stop quietly. Python would flush stdout
        # again at exit and print a second error, so stdout now goes to devnull
        # (the recipe of the ``signal`` module's documentation)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        # Ctrl-C: the user's own act, not an error to explain with a traceback. Nothing
        # half-written is published (an output folder is replaced in one step), so the
        # folder holds what it held before, or this run's whole output if it had finished
        if args.debug_main or getattr(args, "debug", False):
            raise
        print("fastprep: interrupted (an output is published whole or not at all: the "
              "folder keeps its earlier one unless this run had finished)", file=sys.stderr)  # fmt: skip
        return EXIT_INTERRUPTED
    except (FastprepError, OSError) as exc:
        # OSError: the file system refused (no space, no permission, a folder it cannot
        # hold): the user's environment, not a bug to show as a traceback
        if args.debug_main or getattr(args, "debug", False):
            raise
        print(f"fastprep: error: {exc}", file=sys.stderr)
        return 2


def entry(argv: Sequence[str] | None = None) -> NoReturn:
    """The command as a process (``python -m fastprep``, the ``fastprep`` script): :func:`main`,
    then leave without tearing the interpreter down.

    A normal exit deallocates every module (~1,750 after numpy, pyarrow, pandas and numba)
    and every large array one by one: 0.5-1.5 s measured after a 3.4M-row run, for nothing,
    since the operating system frees the process anyway. Everything a normal exit would
    still do for other code is done first, in the same order: non-daemon threads are joined
    (and thread pools stopped), ``atexit`` handlers run (logging's flush, temporary folders,
    a user's own handlers), stdout and stderr are flushed; only then ``os._exit``. Output
    files are already complete (fsynced) when :func:`main` returns. An exception leaves the
    normal way (its traceback)."""
    _keep_freed_memory()
    code = main(argv)
    shutdown_threads = getattr(threading, "_shutdown", None)
    # under a profiler or a tracer (``python -m cProfile -m fastprep``, coverage), their
    # results are saved after this returns: the ordinary exit; so also for an interpreter
    # without threading's shutdown hook
    if shutdown_threads is None or sys.getprofile() is not None or sys.gettrace() is not None:
        raise SystemExit(code)
    shutdown_threads()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # a reader gone (``| head``) or a closed stream: nothing left to say
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


#: glibc's ``mallopt`` parameters (malloc.h)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3


def _keep_freed_memory() -> None:
    """For this short-lived process: arrays up to 32 MiB (glibc's ceiling) come from the
    heap and freed ones are reused, instead of each being a fresh ``mmap`` whose every page
    faults in zero-filled on first touch and is unmapped when freed. A job's temporaries
    of one size follow each other (a column's float64 copy, masks, gathers): at 336k
    rows the run faulted ~33k pages, ~6k fewer this way, and each fault is kernel time
    that grows with the machine's memory pressure. Larger arrays keep their own mapping.
    glibc only; ``FASTPREP_MALLOC_TUNE=0`` leaves the allocator as it is."""
    if os.environ.get("FASTPREP_MALLOC_TUNE") == "0" or not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return
    mallopt(M_MMAP_THRESHOLD, 32 * 2**20)
    mallopt(M_TRIM_THRESHOLD, 2**31 - 1)  # freed memory stays for reuse (exit frees it)
    mallopt(M_TOP_PAD, 64 * 2**20)  # grow the heap in large steps (pages fault on use only)


def _run(args: argparse.Namespace) -> int:
    marks = {"entered": time.time()}  # wall clock: comparable with the launcher's clock
    pipeline = load_pipeline_file(args.pipeline)
    source = args.input or pipeline.sample
    if source is None:
        raise PipelineDefinitionError(
            f"{args.pipeline} names no sample: pass --input PATH or set sample= in fp.Pipeline"
        )
    check_folder(args.output)  # before the pipeline's source is read (the run checks again)
    started, marks["loaded"] = time.perf_counter(), time.time()
    if args.scheduler:
        return _run_distributed(args, pipeline, source, started)
    arrow_without_pandas()  # a job reading files needs no pandas: ~0.2 s of start-up
    fitted, output = pipeline.fit_and_transform(
        source, backend=args.backend, out_dtype=args.out_dtype, on_overflow=args.on_overflow,
        memory_budget=args.memory_budget, output_dir=args.output, compress=args.compress,
        save=False,
    )  # fmt: skip
    if not isinstance(output, Output):  # over the budget: streamed into --output already
        _print_published(output, source, time.perf_counter() - started)
        return 0
    marks["computed"], stages = time.time(), dict(output.report.stages)
    _write(output, fitted, args.output, source, time.perf_counter() - started, args.compress)
    if os.environ.get("FASTPREP_JOB_TIMINGS"):  # for benchmarks/bench_job.py's breakdown
        import json

        marks["written"] = time.time()
        record = {"marks": marks, "stages": stages}
        Path(os.environ["FASTPREP_JOB_TIMINGS"]).write_text(json.dumps(record))
    return 0


def _run_distributed(args: argparse.Namespace, pipeline: Pipeline, source: str,
                     started: float) -> int:  # fmt: skip
    """``--scheduler tcp://host:8786``: fit and transform on that Dask cluster, writing
    shards (``part-NNNNN.*``) and ``manifest.json`` to the output folder.

    One ``fit_and_transform``, as the run in one process: the rows written are the fit's own
    (out of fold for a target encoding), so the report has no drift of the source against
    itself and a fit-only finding (a constant column) is sent once."""
    from fastprep.runtime.cluster.local import connect

    # "local": the LocalCluster a run over its memory budget gets too (one place starts it)
    with connect(args.scheduler) as (client, _where):
        progress = "auto" if args.progress is None else args.progress
        _, opened = pipeline.fit_and_transform(
            source, backend=args.backend, out_dtype=args.out_dtype,
            on_overflow=args.on_overflow, output_dir=args.output, compress=args.compress,
            client=client, progress=progress,
        )  # fmt: skip
    _print_published(opened, f"{source} on {args.scheduler}", time.perf_counter() - started)
    return 0


def _transform(args: argparse.Namespace) -> int:
    if not args.input:
        # a saved state may name the path it was fitted on, but that is the training data
        # (and another machine's path): data to transform is always named explicitly
        raise PipelineDefinitionError(
            f"transform needs --input SRC: the data to apply {args.state} to"
        )
    folder = transform_folder(args.state, args.input, args.output)
    fitted = load(args.state)
    _check_quantization(fitted, args.state, args.out_dtype)
    source = args.input
    arrow_without_pandas()
    started = time.perf_counter()
    # written to the folder by transform itself: streamed shard by shard when over the
    # memory budget, else saved whole (the fitted pipeline published with the arrays)
    output = fitted.transform(
        source, backend=args.backend, out_dtype=args.out_dtype, on_overflow=args.on_overflow,
        memory_budget=args.memory_budget, output_dir=folder, compress=args.compress,
        pipeline=fitted,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if not isinstance(output, Output):
        _print_published(output, source, seconds)
        return 0
    _write(output, fitted, folder, source, seconds, args.compress, saved=True)
    return 0


def transform_folder(state: str, source: str, output: str | None) -> str:
    """Where ``transform`` writes: ``output``, or a new ``transform-<input>-<n>`` folder
    beside ``state``; never the folder holding ``state`` (the training run's output,
    which the transform's X would silently replace)."""
    home = Path(state).resolve().parent
    if output is not None:
        if Path(output).resolve() == home:
            raise PipelineDefinitionError(
                f"--output {output} is the folder of {state}: its X, y and report are the "
                "training run's and would be overwritten; choose another folder, or omit "
                "--output for a new one beside the state"
            )
        check_folder(output)  # before the state is loaded
        return output
    stem = Path(source.rstrip("/\\")).name.split(".")[0] or "input"
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", stem).strip("_") or "input"
    n = 1
    while (home / f"transform-{stem}-{n}").exists():
        n += 1
    return str(home / f"transform-{stem}-{n}")


def _check_quantization(fitted: FittedPipeline, state: str, out_dtype: str) -> None:
    """int8/uint8 output needs the state's calibration: say so before reading any data."""
    if out_dtype not in QUANTIZED_DTYPES:
        return
    have = fitted.quantization.dtype if fitted.quantization is not None else None
    if have != out_dtype:
        raise PipelineDefinitionError(
            f"--out-dtype {out_dtype} needs a {out_dtype} calibration in the state, and "
            f"{state} has {'none' if have is None else 'a ' + have + ' one'}: in Python, "
            f"fitted.calibrate_quantization(train, {out_dtype!r}); fitted.save(...)"
        )


def _print_published(output: OpenedOutput, source: object, seconds: float) -> None:
    report = output.report
    print(f"fastprep: {source}")
    print(f"rows: {report.get('rows_in', 0):,} in, {report.get('rows_out', 0):,} out, "
          f"{report.get('rows_quarantined', 0):,} quarantined")  # fmt: skip
    for note in output.notes:
        print(f"note: {note}")
    print(f"total {seconds:.3f}s")
    print(_wrote(output.folder))


def _write(
    output: Output,
    fitted: FittedPipeline,
    folder: str,
    source: object,
    seconds: float,
    compress: str | None = None,
    saved: bool = False,
) -> None:
    # the fitted pipeline is published with the arrays: the folder never mixes two runs
    if not saved:
        output.save(folder, compress=compress, pipeline=fitted)
    print(f"fastprep: {source}")
    print(output.report.summary())
    print(f"total {seconds:.3f}s")
    print(_wrote(folder))


def _wrote(folder: str | os.PathLike[str]) -> str:
    """What the user got, from the published manifest (the same line for every run):
    the files it names (arrays, quarantine, report) apart from the fitted pipeline, and
    the shards when there are several; never the folder's locks or the pipeline alias."""
    from fastprep.storage.output_format import named_files
    from fastprep.storage.shards import open_output

    opened = open_output(folder)
    pipeline = opened.pipeline_path
    data = named_files(opened.manifest) - ({pipeline.name} if pipeline is not None else set())
    size = sum((opened.folder / name).stat().st_size for name in data) / 2**20
    codec = f", {opened.codec}" if opened.codec else ""
    shards = f" in {len(opened)} shards" if len(opened) > 1 else ""
    state = f", fitted pipeline {STATE_FILE}" if pipeline is not None else ""
    return (f"wrote {os.fspath(folder)}: manifest.json + {len(data)} files ({size:,.1f} MiB"
            f"{codec}){shards}{state}")  # fmt: skip


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``command``, that command's alone (what a run
    parses: building every command's options, the benchmark's among them, was a few ms
    of each start)."""
    parser = _Parser(prog="fastprep", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", dest="debug_main", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command")
    for name, add in COMMANDS.items():
        if command in (None, name):
            add(sub)
    return parser


def _command_named(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (its first word that is not an option), if it is one."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return first if first in COMMANDS else None


def _add_run(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="fit a pipeline file on a source and transform it")
    run.add_argument("pipeline", help="a Python file defining an fp.Pipeline")
    run.add_argument(
        "--input", "-i",
        help="CSV/Parquet file, folder or glob (default: the pipeline's sample=)",
    )  # fmt: skip
    run.add_argument("--output", "-o", default="out", help="output folder (default: out/)")
    run.add_argument(
        "--scheduler",
        help="run on a Dask cluster (tcp://host:8786, or 'local' for a LocalCluster); "
        "writes shards + manifest.json",
    )
    run.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help="with --scheduler: a progress bar per stage on stderr (default: when stderr "
        "is a terminal)",
    )  # fmt: skip
    _common(run, FLOAT_DTYPES)
    run.set_defaults(handler=_run)
    run.add_argument("--debug", action="store_true", help="show tracebacks")


def _add_transform(sub: argparse._SubParsersAction) -> None:
    transform = sub.add_parser("transform", help="apply a saved fitted pipeline to a source")
    transform.add_argument("state", help=f"a saved fitted pipeline (e.g. out/{STATE_FILE})")
    transform.add_argument("--input", "-i", help="CSV/Parquet file, folder or glob (required)")
    transform.add_argument(
        "--output", "-o",
        help="output folder (default: a new transform-<input>-<n>/ beside the state; "
        "never the state's own folder)",
    )  # fmt: skip
    _common(transform, FLOAT_DTYPES + QUANTIZED_DTYPES)
    transform.set_defaults(handler=_transform)
    transform.add_argument("--debug", action="store_true", help="show tracebacks")


def _add_explain(sub: argparse._SubParsersAction) -> None:
    explain = sub.add_parser("explain", help="print the plan: as declared and as optimized")
    explain.add_argument("pipeline", help="a Python file defining an fp.Pipeline")
    explain.add_argument("--stage", default="optimized", choices=["logical", "optimized"])
    explain.add_argument(
        "--input", "-i",
        help="a source: add the pre-flight and the backend chosen per stage (default: the "
        "pipeline's sample=)",
    )  # fmt: skip
    explain.add_argument("--analyze", action="store_true", help="also run it: measured times")
    _backend_option(explain)
    explain.add_argument("--memory-budget", help="the pre-flight's budget, e.g. 2GB")
    explain.add_argument(
        "--scheduler",
        help="the Dask job on that cluster (tcp://host:8786, or 'local'): partitions, passes "
        "and predicted time per pass",
    )  # fmt: skip
    explain.add_argument("--rows-per-partition", type=int, help="rows per Dask partition")
    explain.add_argument("--debug", action="store_true", help="show tracebacks")
    explain.set_defaults(handler=_explain)


def _add_calibrate(sub: argparse._SubParsersAction) -> None:
    calibrate = sub.add_parser(
        "calibrate", help="measure the planner's cost constants on this machine (< 1 min)"
    )
    calibrate.add_argument("--profile", help="where to store it (default: the user cache)")
    calibrate.add_argument("--debug", action="store_true", help="show tracebacks")
    calibrate.set_defaults(handler=_calibrate)


def _add_validate(sub: argparse._SubParsersAction) -> None:
    check = sub.add_parser("validate", help="run the pipeline's input checks alone")
    check.add_argument("pipeline", help="a Python file defining an fp.Pipeline")
    check.add_argument(
        "--input", "-i",
        help="CSV/Parquet file, folder or glob (default: the pipeline's sample=)",
    )  # fmt: skip
    check.add_argument("--report", help="also write the findings as JSON to this file")
    check.add_argument("--debug", action="store_true", help="show tracebacks")
    check.set_defaults(handler=_validate)


def _validate(args: argparse.Namespace) -> int:
    from fastprep.cli.validate import run_checks

    pipeline = load_pipeline_file(args.pipeline)
    source = args.input or pipeline.sample
    if source is None:
        raise PipelineDefinitionError(f"{args.pipeline} names no sample: pass --input PATH")
    result = run_checks(pipeline, source)
    print(f"fastprep validate: {source}")
    print(result.summary())
    if args.report:
        import json

        with open(args.report, "w", encoding="utf-8") as handle:
            json.dump(result.report.to_dict(), handle, indent=1)
    return 1 if result.failed else 0


def _explain(args: argparse.Namespace) -> int:
    pipeline = load_pipeline_file(args.pipeline)
    source = args.input or pipeline.sample
    if args.analyze and source is None:
        raise PipelineDefinitionError(
            f"explain --analyze needs --input SRC ({args.pipeline} names no sample=)"
        )
    print(pipeline.explain(source, stage=args.stage, analyze=args.analyze, backend=args.backend,
                           memory_budget=args.memory_budget, scheduler=args.scheduler,
                           rows_per_partition=args.rows_per_partition))  # fmt: skip
    if source is None and args.stage == "optimized":
        print("(no --input and no sample= in the pipeline file: backends per stage not planned)")
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    from fastprep.cli import calibrate

    path = calibrate.run(
        Path(args.profile) if args.profile else None, progress=lambda m: print(m, flush=True)
    )
    print(f"cost profile written to {path}")
    print(path.read_text())
    return 0


def _add_bench(sub: argparse._SubParsersAction) -> None:
    """``fastprep bench``: registered by the benchmark harness (optional extra ``[bench]``)."""
    try:
        from fastprep.bench.cli import add_parser
    except ImportError as exc:
        missing = str(exc)

        def unavailable(_: argparse.Namespace) -> int:
            print(
                f"fastprep bench needs: pip install 'fastprep[bench]' ({missing})", file=sys.stderr
            )
            return 2

        bench = sub.add_parser("bench", help="benchmark (needs the [bench] extra)")
        bench.add_argument("rest", nargs=argparse.REMAINDER)
        bench.add_argument("--debug", action="store_true")
        bench.set_defaults(handler=unavailable)
        return
    add_parser(sub)


#: every command, in the order ``fastprep --help`` lists them
COMMANDS = {
    "run": _add_run,
    "transform": _add_transform,
    "explain": _add_explain,
    "calibrate": _add_calibrate,
    "bench": _add_bench,
    "validate": _add_validate,
}


def _backend_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend", default="auto", choices=BACKENDS,
        help="auto (default: the planner picks per stage) or one backend for every stage: "
        + ", ".join(BACKENDS[1:]),
    )  # fmt: skip


def _common(parser: argparse.ArgumentParser, out_dtypes: tuple[str, ...]) -> None:
    _backend_option(parser)
    quantized = set(out_dtypes) & set(QUANTIZED_DTYPES)
    parser.add_argument(
        "--out-dtype", default="float32", choices=out_dtypes,
        help="type of X (default float32); bfloat16 is stored as uint16 bits"
        + ("; int8/uint8 need a state calibrated for that type "
           "(fitted.calibrate_quantization)" if quantized else ""),
    )  # fmt: skip
    parser.add_argument(
        "--on-overflow", default="raise", choices=["raise", "clip"],
        help="a value beyond float16/bfloat16's range: raise (default) or clip (reported)",
    )  # fmt: skip
    parser.add_argument(
        "--compress", choices=["zstd", "lz4"], default=None,
        help="compress the output arrays (default: plain memory-mappable .npy)",
    )  # fmt: skip
    parser.add_argument(
        "--memory-budget",
        help="the whole job's memory (every process), e.g. 1.5GB (default: "
        "$FASTPREP_MEMORY_BUDGET, else the available memory less headroom); a source over "
        "it is streamed partition by partition into the output folder, or refused with "
        "the smallest budget that would work",
    )  # fmt: skip


if __name__ == "__main__":
    entry()
