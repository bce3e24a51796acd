"""The whole job as users run it: fresh processes from a Parquet file to X and y on disk.

Three competitors do the same job, each as a new process: ``fastprep run PIPELINE --input
FILE --output DIR`` and two standalone scripts in ``benchmarks/job_scripts/`` (Polars;
pandas + scikit-learn). Per size:

1. Gate: each competitor runs once (untimed; it also warms the OS file cache and
   fastprep's kernel cache) and its X and y are compared with fastprep's. fastprep's
   emitted rows must be exactly the rows with a target (the scripts drop only those), and
   a competitor that disagrees is an error, never a time.
2. Rounds alternate the competitors (a, b, c, a, b, c, ...): wall time from launch to
   exit and peak RSS of that one process (``os.wait4``'s rusage). fastprep's runs also
   write a timing record (``FASTPREP_JOB_TIMINGS``) for the breakdown: start-up (launch
   to the CLI's first line: interpreter + imports), loading the pipeline file, the run's
   stages from its report, writing, and interpreter exit.

On the bundled sample, fastprep also runs cold: fresh empty ``FASTPREP_CACHE_DIR`` and
``NUMBA_CACHE_DIR`` (a first run on a new install), then the same command once more.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "benchmarks" / "job_scripts"
SAMPLE = "sample"  # the --rows token for the bundled data_samples/flights.parquet
FASTPREP, POLARS, PANDAS = "fastprep", "polars", "pandas+sklearn"
LABELS = {FASTPREP: "fastprep run", POLARS: "Polars script", PANDAS: "pandas + sklearn script"}
SCRIPT_FILES = {POLARS: "polars_job.py", PANDAS: "pandas_sklearn_job.py"}
#: what start-up costs without fastprep's job: the floor any such job pays, and fastprep's own
STARTUP_PROBES = {
    "numpy + pandas + pyarrow.parquet": "import numpy, pandas, pyarrow.parquet",
    "import fastprep": "import fastprep",
}


@dataclass
class JobConfig:
    """What to run; mirrors the command-line options of ``benchmarks/bench_job.py``."""

    pipeline: str = str(ROOT / "pipelines" / "flights.py")
    rows: list[int | str] = field(default_factory=lambda: [SAMPLE, 336_776, 3_367_760])
    repeat: int = 5
    cold_repeat: int = 3
    competitors: list[str] = field(default_factory=lambda: [FASTPREP, POLARS, PANDAS])
    data_dir: str = str(ROOT / "benchmarks" / "results" / "data")
    #: "module": ``python -m fastprep``; "script": the ``fastprep`` console script
    via: str = "module"
    #: also time bare imports (``STARTUP_PROBES``) in fresh processes
    startup_probes: bool = True
    timeout: float = 1800.0
    progress: bool = True
    #: before each size's gate, one untimed ``--backend numba`` run with every helper on
    #: Numba (``FASTPREP_KERNEL_PATH=numba``): every kernel the job can use is compiled, the
    #: state a repeated job reaches by itself after some runs (the planner compiles once the
    #: time lost on numpy has paid for the compile); the timed runs are ``auto`` as always
    warm_kernels: bool = True
    #: compile fastprep's modules to bytecode first, as ``pip install`` does: a checkout run
    #: with PYTHONDONTWRITEBYTECODE=1 would otherwise compile ~100 modules from source in
    #: every process (0.1-0.2 s), which no installed copy does
    compile_bytecode: bool = True


def fastprep_command(via: str) -> list[str]:
    """How users start fastprep: ``python -m fastprep`` or the installed console script."""
    if via == "module":
        return [sys.executable, "-m", "fastprep"]
    script = Path(sys.executable).with_name("fastprep")
    found = str(script) if script.exists() else shutil.which("fastprep")
    if found is None:
        raise FileNotFoundError("--via script: no 'fastprep' console script is installed")
    return [found]


def command(name: str, config: JobConfig, source: str, output: str,
            extra_args: tuple[str, ...] = ()) -> list[str]:  # fmt: skip
    """The command line of one competitor's job."""
    if name == FASTPREP:
        return [*fastprep_command(config.via), "run", config.pipeline,
                "--input", source, "--output", output, *extra_args]  # fmt: skip
    script = SCRIPTS / SCRIPT_FILES[name]
    if not script.exists():
        raise FileNotFoundError(f"{script}: the job scripts live in the repository's benchmarks/")
    return [sys.executable, str(script), "--input", source, "--output", output]


#: GNU time measures the job's peak RSS from a tiny parent: a child of this (large) process
#: would report at least our own peak, since Linux carries the high-water mark across exec
GNU_TIME = "/usr/bin/time"


def launch(argv: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    """One fresh process: wall seconds from launch to exit, its own peak RSS, launch time."""
    with tempfile.TemporaryDirectory(prefix="fastprep-launch-") as tmp:
        rss_file = Path(tmp) / "maxrss"
        use_time = os.access(GNU_TIME, os.X_OK)
        if use_time:
            argv = [GNU_TIME, "-f", "%M", "-o", str(rss_file), *argv]
        out, err = open(Path(tmp) / "out", "wb"), open(Path(tmp) / "err", "wb")  # noqa: SIM115
        with out, err:
            launched = time.time()
            start = time.perf_counter()
            proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=ROOT,
                                    start_new_session=True)  # fmt: skip
            killer = threading.Timer(timeout, os.killpg, (proc.pid, signal.SIGKILL))
            killer.start()
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            except BaseException:  # interrupted: the job's own session would outlive us
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise
            finally:
                killer.cancel()
            wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        tail = (Path(tmp) / "err").read_text(errors="replace").strip().splitlines()[-5:]
        peak_kib = float(usage.ru_maxrss)  # KiB on Linux
        if use_time:
            lines = rss_file.read_text().split() if rss_file.exists() else []
            peak_kib = float(lines[-1]) if lines and lines[-1].isdigit() else float("nan")
    return {
        "seconds": wall,
        "peak_rss_mib": peak_kib / 1024,
        "memory_method": "GNU time %M" if use_time else "wait4 ru_maxrss (at least the launcher's)",
        "launched": launched,
        "returncode": proc.returncode,
        "timed_out": wall > timeout,
        "stderr_tail": tail,
    }


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The caller's environment, with this checkout first on the path (the CLI under test)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


def run_job(name: str, config: JobConfig, source: str, output: Path,
            extra_env: dict[str, str] | None = None,
            extra_args: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
    """One job in a fresh process (output folder removed first, untimed); fastprep's
    sample carries its breakdown."""
    shutil.rmtree(output, ignore_errors=True)
    env = child_env(extra_env)
    record = output.parent / f"{output.name}.timings.json"
    record.unlink(missing_ok=True)
    if name == FASTPREP:
        env["FASTPREP_JOB_TIMINGS"] = str(record)
    sample = launch(command(name, config, source, str(output), extra_args), env, config.timeout)
    if sample["returncode"] != 0:
        why = "timed out" if sample["timed_out"] else f"exit code {sample['returncode']}"
        raise RuntimeError(f"{LABELS[name]} failed ({why}): {' | '.join(sample['stderr_tail'])}")
    if name == FASTPREP and record.exists():
        sample["breakdown"] = breakdown(json.loads(record.read_text()), sample)
        record.unlink()
    return sample


def breakdown(record: dict[str, Any], sample: dict[str, Any]) -> dict[str, float]:
    """Seconds per part of fastprep's job, adding up to the process's wall time."""
    marks, stages = record["marks"], record["stages"]  # stages as fit_and_transform left them
    computed = marks["computed"] - marks["loaded"]
    ours = ("start-up", "load pipeline", "other", "write", "exit")
    parts = {
        "start-up": marks["entered"] - sample["launched"],
        "load pipeline": marks["loaded"] - marks["entered"],
        **{f"stage {n}" if n in ours else n: float(s) for n, s in stages.items()},
    }
    parts["other"] = computed - sum(float(s) for s in stages.values())
    parts["write"] = marks["written"] - marks["computed"]
    parts["exit"] = sample["launched"] + sample["seconds"] - marks["written"]
    return parts


# ---------------------------------------------------------------------------------------
# the correctness gate


def read_output(name: str, folder: Path) -> tuple[Any, np.ndarray, np.ndarray | None]:
    """``(X, y, row_ids)`` of a competitor's folder (fastprep: through ``fp.open_output``)."""
    import scipy.sparse as sp

    if name == FASTPREP:
        from fastprep import open_output

        opened = open_output(folder)
        try:  # one shard (a local run)
            return opened.X, np.asarray(opened.y), np.asarray(opened.row_ids)
        except ValueError:  # several shards: stacked in order
            shards = list(opened)
        X = sp.vstack([s.X for s in shards], format="csr")
        y = np.concatenate([np.asarray(s.y) for s in shards])
        return X, y, np.concatenate([np.asarray(s.row_ids) for s in shards])

    def load(part: str) -> np.ndarray:
        return np.load(folder / f"{part}.npy", allow_pickle=False)

    shape = tuple(int(n) for n in load("X.shape"))
    X = sp.csr_matrix((load("X.data"), load("X.indices"), load("X.indptr")), shape=shape)
    return X, load("y"), None


def rows_with_target(source: str, target: str = "arr_delay") -> np.ndarray:
    """Positions of the source's rows whose target is present (what every script keeps)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    column = pq.read_table(source, columns=[target]).column(target)
    present = pc.and_(pc.is_valid(column), pc.invert(pc.is_nan(column))).fill_null(False)
    return np.flatnonzero(present.to_numpy(zero_copy_only=False))


def same_output(X: Any, y: np.ndarray, X_ref: Any, y_ref: np.ndarray) -> dict[str, Any]:
    """Exact CSR structure and values within the harness's tolerance; when the structure
    differs (explicit zeros, unsorted indices) the harness's canonical comparison decides."""
    from fastprep.bench.harness import ATOL, RTOL, compare

    y, y_ref = np.asarray(y, dtype=np.float64), np.asarray(y_ref, dtype=np.float64)
    if (
        X.shape == X_ref.shape
        and np.array_equal(X.indptr, X_ref.indptr)
        and np.array_equal(X.indices, X_ref.indices)
    ):
        data, ref = np.asarray(X.data, np.float64), np.asarray(X_ref.data, np.float64)
        diff = float(np.max(np.abs(data - ref), initial=0.0))
        ok = bool(np.allclose(data, ref, rtol=RTOL, atol=ATOL))
        y_ok = y.shape == y_ref.shape and bool(np.allclose(y, y_ref, rtol=RTOL, atol=ATOL))
        detail = "; ".join(
            w for w, bad in (("X values differ", not ok), ("y differs", not y_ok)) if bad
        )
        return {"ok": ok and y_ok, "max_abs_diff": diff, "detail": detail}
    return compare(X, y, X_ref, y_ref)


def gate(config: JobConfig, source: str, work: Path) -> dict[str, Any]:
    """Each competitor once (untimed), outputs compared with fastprep's."""
    entries: dict[str, Any] = {}
    X_ref = y_ref = None
    for name in config.competitors:
        entry: dict[str, Any] = {"label": LABELS[name]}
        entries[name] = entry
        folder = work / name
        try:
            if name == FASTPREP and config.warm_kernels:
                entry["kernel_warmup"] = warm_kernels(config, source, folder)
            entry["first_run"] = run_job(name, config, source, folder)
            X, y, row_ids = read_output(name, folder)
        except Exception as exc:  # reported, never timed
            entry["gate"] = {"ok": False, "detail": f"ERROR: {type(exc).__name__}: {exc}"}
            continue
        if name == FASTPREP:
            expected = rows_with_target(source)
            same_rows = row_ids is not None and np.array_equal(row_ids, expected)
            entry["gate"] = {"ok": bool(same_rows), "max_abs_diff": 0.0, "detail": "" if same_rows
                             else "fastprep emitted other rows than those with a target "
                             f"({0 if row_ids is None else len(row_ids)} vs {len(expected)}): "
                             "the scripts would do a different job"}  # fmt: skip
            X_ref, y_ref = X, y
            entry["output"] = {"shape": list(X.shape), "nnz": int(X.nnz),
                               "bytes": int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
                                            + np.asarray(y).nbytes)}  # fmt: skip
        elif X_ref is None:
            entry["gate"] = {"ok": False, "detail": "no fastprep output to compare with"}
        else:
            entry["gate"] = same_output(X, y, X_ref, y_ref)
        del X, y
        shutil.rmtree(folder, ignore_errors=True)
    return entries


def warm_kernels(config: JobConfig, source: str, folder: Path) -> dict[str, Any]:
    """One untimed run with every stage and helper on Numba: compiles (or loads) every
    kernel the job can use into the kernel cache (see ``JobConfig.warm_kernels``)."""
    sample = run_job(FASTPREP, config, source, folder, {"FASTPREP_KERNEL_PATH": "numba"},
                     ("--backend", "numba"))  # fmt: skip
    shutil.rmtree(folder, ignore_errors=True)
    return {"seconds": sample["seconds"], "peak_rss_mib": sample["peak_rss_mib"]}


def compile_bytecode() -> dict[str, Any]:
    """fastprep's modules compiled to ``__pycache__`` (see ``JobConfig.compile_bytecode``)."""
    import compileall

    started = time.perf_counter()
    ok = compileall.compile_dir(str(ROOT / "fastprep"), quiet=1)
    return {"ok": bool(ok), "seconds": round(time.perf_counter() - started, 3)}


# ---------------------------------------------------------------------------------------
# timing


def time_rounds(config: JobConfig, source: str, work: Path, entries: dict[str, Any],
                tick: Any) -> None:  # fmt: skip
    """``config.repeat`` rounds, each running every competitor that passed its gate once."""
    passing = [n for n in config.competitors if entries[n]["gate"]["ok"]]
    for name in passing:
        entries[name]["samples"] = []
    for round_no in range(config.repeat):
        for name in passing:
            try:
                entries[name]["samples"].append(run_job(name, config, source, work / name))
            except RuntimeError as exc:
                entries[name].setdefault("errors", []).append(str(exc))
            tick(f"round {round_no + 1}/{config.repeat} {name}")
    for name in passing:
        shutil.rmtree(work / name, ignore_errors=True)
        entries[name]["summary"] = summarize(entries[name]["samples"])


def cold_runs(config: JobConfig, source: str, work: Path, tick: Any) -> dict[str, Any]:
    """fastprep with empty kernel caches (a first run on a new install), then the same
    command again with the caches that run left."""
    first, second = [], []
    for number in range(config.cold_repeat):
        caches = Path(tempfile.mkdtemp(prefix="fastprep-cold-", dir=work))
        env = {"FASTPREP_CACHE_DIR": str(caches / "fastprep"),
               "NUMBA_CACHE_DIR": str(caches / "numba")}  # fmt: skip
        try:
            first.append(run_job(FASTPREP, config, source, work / "cold", env))
            second.append(run_job(FASTPREP, config, source, work / "cold", env))
        finally:
            shutil.rmtree(caches, ignore_errors=True)
            shutil.rmtree(work / "cold", ignore_errors=True)
        tick(f"cold run {number + 1}/{config.cold_repeat}")
    return {"first": summarize(first), "second": summarize(second),
            "first_samples": first, "second_samples": second}  # fmt: skip


def startup_probes(config: JobConfig, tick: Any) -> dict[str, Any]:
    """Each probe in a fresh process, alternated, ``config.repeat`` rounds."""
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in STARTUP_PROBES}
    for round_no in range(config.repeat):
        for name, code in STARTUP_PROBES.items():
            sample = launch([sys.executable, "-c", code], child_env(), config.timeout)
            if sample["returncode"] == 0:
                samples[name].append(sample)
        tick(f"start-up probes, round {round_no + 1}/{config.repeat}")
    return {name: summarize(found) for name, found in samples.items()}


def summarize(samples: list[dict[str, Any]]) -> dict[str, Any]:
    if not samples:
        return {"n": 0}
    seconds = [s["seconds"] for s in samples]
    rss = [s["peak_rss_mib"] for s in samples]
    summary: dict[str, Any] = {
        "n": len(samples),
        "median_s": statistics.median(seconds),
        "min_s": min(seconds),
        "max_s": max(seconds),
        "peak_rss_mib": statistics.median(rss),
        "peak_rss_max_mib": max(rss),
    }
    parts = [s["breakdown"] for s in samples if "breakdown" in s]
    if parts:
        names = list(dict.fromkeys(k for p in parts for k in p))
        summary["breakdown_s"] = {k: statistics.median(p.get(k, 0.0) for p in parts) for k in names}
    return summary


def size_source(size: int | str, config: JobConfig) -> tuple[str, str]:
    """``(label, Parquet path)`` of one size: the bundled sample or generated flights rows."""
    if size == SAMPLE:
        return "20,000 (bundled sample)", str(ROOT / "data_samples" / "flights.parquet")
    from fastprep.bench import data

    return f"{int(size):,}", str(data.dataset(int(size), config.data_dir))


def machine() -> dict[str, Any]:
    from fastprep.bench import roofline

    info = roofline.machine()
    try:
        info["commit"] = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        changed = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        info["uncommitted_changes"] = bool(changed)
    except (OSError, subprocess.CalledProcessError):
        info["commit"] = None
    info["load_average"] = list(os.getloadavg())
    return info


def run(config: JobConfig, command_line: str = "") -> dict[str, Any]:
    """The whole job benchmark; a JSON-ready dict (see :mod:`fastprep.bench.job_report`)."""
    from tqdm import tqdm

    results: dict[str, Any] = {
        "command": command_line,
        "pipeline": config.pipeline,
        "via": " ".join(fastprep_command(config.via)),
        "machine": machine(),
        "config": {k: v for k, v in vars(config).items() if k != "progress"},
        "sizes": [],
    }
    n = len(config.competitors)
    total = len(config.rows) * n * (1 + config.repeat)
    if SAMPLE in config.rows and FASTPREP in config.competitors:
        total += config.cold_repeat
    total += config.repeat if config.startup_probes else 0
    if config.compile_bytecode:
        results["bytecode"] = compile_bytecode()
    work = Path(tempfile.mkdtemp(prefix="fastprep-jobbench-"))
    try:
        with tqdm(total=total, file=sys.stderr, disable=not config.progress, unit="job") as bar:
            for size in config.rows:
                label, source = size_source(size, config)

                def tick(what: str, label: str = label) -> None:
                    bar.set_description(f"{label} rows: {what}")
                    bar.update(1)

                entry: dict[str, Any] = {"rows": label, "source": source}
                if size == SAMPLE and FASTPREP in config.competitors and config.cold_repeat:
                    entry["cold"] = cold_runs(config, source, work, tick)
                entry["competitors"] = gate(config, source, work)
                bar.update(n)
                time_rounds(config, source, work, entry["competitors"], tick)
                results["sizes"].append(entry)
            if config.startup_probes:
                results["startup"] = startup_probes(config, lambda what: (
                    bar.set_description(what), bar.update(1)))  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["finished"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    results["machine"]["load_average_after"] = list(os.getloadavg())
    return results


def failed(results: dict[str, Any]) -> list[str]:
    """What went wrong: failed gates and failed runs (an empty list when all is well)."""
    problems = []
    for size in results["sizes"]:
        for name, entry in size["competitors"].items():
            if not entry["gate"]["ok"]:
                problems.append(f"{size['rows']} rows, {name}: {entry['gate']['detail']}")
            problems += [f"{size['rows']} rows, {name}: {e}" for e in entry.get("errors", [])]
    return problems
