"""Gate, then time: the order the benchmark promises its readers.

1. fastprep runs once on the generated rows; the rows it emits (``out.row_ids``) are the
   rows every competitor gets, so quarantine logic never has to be re-implemented.
2. Correctness gate: every competitor's X and y are compared with fastprep's on those
   rows. A competitor that disagrees (or cannot express an op) is reported and never timed.
3. Timing, round-robin: round r runs each passing competitor once in a fresh worker process
   (see :mod:`fastprep.bench.worker`: run 1 there is cold, later runs warm — one, or more
   while they take under ``WARM_BUDGET_S``, their median reported — peak RSS per run).
4. Working memory, same rounds: each competitor timed on all the rows (not the naive one
   extrapolated from a sample) also gets one more fresh process that first runs fit +
   transform untimed on the same rows (kernels loaded or compiled, lazy imports done),
   releases what it retained (``fastprep.release_memory()``), then runs once more: peak −
   RSS before that run is ``working_mib``. The cold peak includes the one-time costs;
   the memory target (one-time compilation excluded) does not, so it is judged
   on this number. It is not a timing sample.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from fastprep.bench import data, impls, roofline
from fastprep.bench.impls import Implementation

RTOL = ATOL = 1e-6
#: warm runs per worker process continue while they add up to less than this (a 20k-row
#: call of ~20 ms timed once is mostly noise); at most ``MAX_RUNS`` runs per process
WARM_BUDGET_S = 0.5
MAX_RUNS = 12
#: rows of the untimed warm-up before a working-memory run: None = all of them (the same
#: kernels as the measured run, including those only used past a size)
WARMUP_ROWS: int | None = None
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


@dataclass
class Config:
    """What to run; mirrors the command-line options."""

    pipeline: str = "pipelines/flights.py"
    rows: list[int] = field(default_factory=lambda: [20_000, 336_776, 3_367_760])
    repeat: int = 3
    impls: list[str] | None = None
    output: str = "benchmarks/results"
    cache_dir: str = "benchmarks/.cache"
    naive_sample: int = 20_000
    #: rows of the untimed warm-up of each working-memory sample (see ``WARMUP_ROWS``)
    warmup_rows: int | None = WARMUP_ROWS
    #: "process": each sample in a fresh worker process (the real thing); "inline": in this
    #: process, cold = first run here (quicker, for the CI smoke run only)
    isolation: str = "process"
    timeout: float = 3600.0
    progress: bool = True


def compare(X: Any, y: Any, X_ref: Any, y_ref: Any) -> dict[str, Any]:
    """Gate one output against fastprep's: ``ok``, ``max_abs_diff`` and what differs."""
    if X.shape != X_ref.shape:
        return {"ok": False, "max_abs_diff": None, "detail": f"X shape {X.shape} != {X_ref.shape}"}
    detail = []
    if sp.issparse(X) != sp.issparse(X_ref):
        detail.append(f"layout {'csr' if sp.issparse(X) else 'dense'} (fastprep: the other)")
    if sp.issparse(X_ref):
        ok, diff, why = _compare_csr(sp.csr_matrix(X), X_ref)
    else:
        dense = X.toarray() if sp.issparse(X) else np.asarray(X)
        diff = float(np.max(np.abs(dense - X_ref), initial=0.0))
        ok, why = bool(np.allclose(dense, X_ref, rtol=RTOL, atol=ATOL)), "X values differ"
    if not ok:
        detail.append(why)
    if (y is None) != (y_ref is None):
        ok = False
        detail.append("y missing on one side")
    elif y is not None:
        y = np.asarray(y, dtype=np.float64)
        if y.shape != y_ref.shape or not np.allclose(y, y_ref, rtol=RTOL, atol=ATOL):
            ok = False
            detail.append(f"y differs (shape {y.shape})")
    return {"ok": ok, "max_abs_diff": diff, "detail": "; ".join(detail)}


def _canonical(M: sp.csr_matrix) -> sp.csr_matrix:
    out = sp.csr_matrix(M, dtype=np.float64, copy=True)
    out.sum_duplicates()
    out.eliminate_zeros()  # explicit zeros are not structure a model can see
    out.sort_indices()
    return out


def _compare_csr(X: sp.csr_matrix, ref: sp.csr_matrix) -> tuple[bool, float, str]:
    A, B = _canonical(X), _canonical(ref)
    diff = float(abs(A - B).max()) if A.nnz or B.nnz else 0.0
    if not (np.array_equal(A.indptr, B.indptr) and np.array_equal(A.indices, B.indices)):
        rows = int(np.count_nonzero(np.diff(A.indptr) != np.diff(B.indptr)))
        return False, diff, f"sparsity structure differs (nnz {A.nnz} vs {B.nnz}, {rows} rows)"
    return bool(np.allclose(A.data, B.data, rtol=RTOL, atol=ATOL)), diff, "CSR values differ"


def selected(config: Config) -> list[Implementation]:
    """The competitors to run (all registered by default), fastprep variants last."""
    names = config.impls or impls.all_names()
    return [impls.get(name) for name in names]


def _fastprep(pipeline: Any, frame: pd.DataFrame) -> tuple[Any, Any]:
    return impls.fastprep_factory("auto")(pipeline)(frame)


def prepare_size(pipeline: Any, n_rows: int, config: Config, work: Path) -> dict[str, Any]:
    """Generate the rows, let fastprep quarantine, keep the emitted rows for everyone."""
    path = data.dataset(n_rows, config.cache_dir)
    full = pd.read_parquet(path, columns=list(pipeline.plan.columns))
    first = pipeline.fit(full).transform(full)
    clean = full.iloc[first.row_ids].reset_index(drop=True)
    del full
    clean_path = work / f"clean_{n_rows}.parquet"
    clean.to_parquet(clean_path, index=False)
    sample_path = clean_path  # sampled competitors load only their rows (honest peak RSS)
    if len(clean) > config.naive_sample:
        sample_path = work / f"clean_{n_rows}_first{config.naive_sample}.parquet"
        clean.iloc[: config.naive_sample].to_parquet(sample_path, index=False)
    return {
        "sample_path": str(sample_path),
        "rows": n_rows,
        "rows_emitted": len(clean),
        "rows_quarantined": first.report.rows_quarantined,
        "clean": clean,
        "clean_path": str(clean_path),
    }


def gate_size(pipeline: Any, size: dict[str, Any], chosen: list[Implementation], config: Config,
              tick: Any) -> None:  # fmt: skip
    """Run every competitor once in-process and compare with fastprep on the same rows."""
    clean = size.pop("clean")
    X_ref, y_ref = _fastprep(pipeline, clean)
    size["input_bytes"] = roofline.frame_bytes(clean)
    size["output_bytes"] = roofline.output_bytes(X_ref, y_ref)  # X + y as emitted (y float32)
    y_ref = None if y_ref is None else np.asarray(y_ref, dtype=np.float64)
    size["output"] = {"shape": list(X_ref.shape), "layout": "csr" if sp.issparse(X_ref) else "dense",
                      "nnz": int(X_ref.nnz if sp.issparse(X_ref) else np.count_nonzero(X_ref))}  # fmt: skip
    sample_ref: tuple[Any, Any] | None = None
    size["impls"] = {}
    for impl in chosen:
        rows = len(clean)
        if impl.sampled and rows > config.naive_sample:
            rows = config.naive_sample
        frame, ref = clean, (X_ref, y_ref)
        if rows < len(clean):
            frame = clean.iloc[:rows].reset_index(drop=True)
            if sample_ref is None:
                X_s, y_s = _fastprep(pipeline, frame)
                sample_ref = (X_s, None if y_s is None else np.asarray(y_s, dtype=np.float64))
            ref = sample_ref
        entry = {"label": impl.label, "rows_measured": rows, "extrapolated": rows < len(clean),
                 "data": size["sample_path"] if rows < len(clean) else size["clean_path"]}  # fmt: skip
        try:
            X, y = impl.factory(pipeline)(frame)
            entry["gate"] = compare(X, y, *ref)
            del X, y
        except NotImplementedError as exc:
            entry["gate"] = {"ok": False, "max_abs_diff": None, "detail": f"UNSUPPORTED: {exc}"}
        except Exception as exc:  # a crash is a failed gate, reported, never timed
            entry["gate"] = {"ok": False, "max_abs_diff": None,
                             "detail": f"ERROR: {type(exc).__name__}: {exc}"}  # fmt: skip
        size["impls"][impl.name] = entry
        tick(f"{size['rows']:,} rows: gate {impl.name}")


def sample_in_worker(pipeline_file: str, impl: str, clean_path: str, rows: int,
                     timeout: float, isolation: str = "process") -> dict[str, Any]:  # fmt: skip
    """One fresh worker process: run 1 (cold), then warm runs of one competitor (at least
    one; more while they take under ``WARM_BUDGET_S`` in all, up to ``MAX_RUNS`` runs)."""
    spec = {"pipeline": pipeline_file, "impl": impl, "data": clean_path, "rows": rows, "runs": 2,
            "warm_budget_s": WARM_BUDGET_S, "max_runs": MAX_RUNS}  # fmt: skip
    return _worker(spec, timeout, isolation)


def working_memory_in_worker(pipeline_file: str, impl: str, clean_path: str, rows: int,
                             timeout: float, isolation: str = "process",
                             warmup_rows: int | None = WARMUP_ROWS) -> dict[str, Any]:  # fmt: skip
    """One fresh worker process: an untimed warm-up on the first ``warmup_rows`` rows, then
    exactly one measured run; its ``peak_rss_mib[0] - baseline_rss_mib[0]`` is the working
    memory of fit + transform with kernels and imports already loaded."""
    spec = {"pipeline": pipeline_file, "impl": impl, "data": clean_path, "rows": rows, "runs": 1,
            "warm_budget_s": 0.0, "max_runs": 1, "warmup_rows": warmup_rows}  # fmt: skip
    return _worker(spec, timeout, isolation)


def _worker(spec: dict[str, Any], timeout: float, isolation: str) -> dict[str, Any]:
    """``worker.sample(spec)`` in a fresh process (or here, with ``isolation="inline"``)."""
    impl = spec["impl"]
    if isolation == "inline":
        from fastprep.bench.worker import sample

        return sample(spec)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "fastprep.bench.worker", json.dumps(spec)],
        capture_output=True, text=True, timeout=timeout, env=env, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        raise RuntimeError(f"worker for {impl} failed ({done.returncode}): {' | '.join(tail)}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def time_size(size: dict[str, Any], config: Config, pipeline_file: str, tick: Any) -> None:
    """Round-robin over the competitors that passed the gate, ``config.repeat`` rounds; in
    each, one timing sample per competitor and, unless its timings are extrapolated from a
    sample, one working-memory sample (``working_mib``)."""
    passing = [name for name, e in size["impls"].items() if e["gate"]["ok"]]
    for entry in size["impls"].values():
        entry.update(cold_s=[], warm_s=[], peak_rss_mib=[], warm_peak_rss_mib=[],
                     baseline_rss_mib=[], working_mib=[], working_peak_rss_mib=[],
                     working_baseline_rss_mib=[], warmup_s=[])  # fmt: skip
    for round_no in range(config.repeat):
        for name in passing:
            entry = size["impls"][name]
            step = f"{size['rows']:,} rows: round {round_no + 1} {name}"
            try:
                result = sample_in_worker(pipeline_file, name, entry["data"], entry["rows_measured"],
                                          config.timeout, config.isolation)  # fmt: skip
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                entry.setdefault("worker_errors", []).append(str(exc))  # reported, run goes on
                tick(f"{step} FAILED")
                if not entry["extrapolated"]:  # its working-memory sample is skipped too
                    tick(f"{step} working memory skipped")
                continue
            entry["cold_s"].append(result["seconds"][0])
            entry["warm_s"].append(statistics.median(result["seconds"][1:]))
            entry["peak_rss_mib"].append(result["peak_rss_mib"][0])
            entry["warm_peak_rss_mib"].append(result["peak_rss_mib"][1])
            entry["baseline_rss_mib"].append(result["baseline_rss_mib"][0])
            entry["memory_method"] = result["memory_method"]
            tick(step)
            if not entry["extrapolated"]:
                _working_memory(size, entry, name, round_no, config, pipeline_file, tick)


def _working_memory(size: dict[str, Any], entry: dict[str, Any], name: str, round_no: int,
                    config: Config, pipeline_file: str, tick: Any) -> None:  # fmt: skip
    """One working-memory sample of ``name`` into ``entry`` (see step 4 of the module doc)."""
    step = f"{size['rows']:,} rows: round {round_no + 1} {name} working memory"
    try:
        result = working_memory_in_worker(
            pipeline_file, name, entry["data"], entry["rows_measured"], config.timeout,
            config.isolation, config.warmup_rows,
        )  # fmt: skip
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        entry.setdefault("worker_errors", []).append(f"working memory: {exc}")
        tick(f"{step} FAILED")
        return
    peak, baseline = result["peak_rss_mib"][0], result["baseline_rss_mib"][0]
    entry["working_mib"].append(peak - baseline)
    entry["working_peak_rss_mib"].append(peak)
    entry["working_baseline_rss_mib"].append(baseline)
    entry["warmup_s"].append(result["warmup_s"])
    entry["warmup_rows"] = result["warmup_rows"]
    tick(step)


ROWS_NOTE = (
    "All implementations get the same rows: fastprep runs once first, and only the rows it "
    "emits (out.row_ids, i.e. after validation and target quarantine) are handed to every "
    "competitor as a pandas DataFrame of the columns the pipeline reads; each then does "
    "fit + transform on them (fastprep still validates them, the others do not)."
)


def run(config: Config, command: str = "") -> dict[str, Any]:
    """The whole benchmark: machine, bandwidth, then per size prepare → gate → time."""
    from tqdm import tqdm

    from fastprep.pipeline import load_pipeline_file

    pipeline = load_pipeline_file(config.pipeline)
    chosen = selected(config)
    work = Path(config.cache_dir) / "work"
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "command": command,
        "pipeline": config.pipeline,
        "machine": roofline.machine(),
        "bandwidth": roofline.copy_bandwidth(),
        "rows_note": ROWS_NOTE,
        "config": {k: v for k, v in vars(config).items() if k != "progress"},
        "isolation": config.isolation,
        "sizes": [],
    }
    total = len(config.rows) * len(chosen) * (1 + config.repeat)
    with tqdm(total=total, file=sys.stderr, disable=not config.progress, unit="step") as bar:

        def tick(description: str) -> None:
            bar.set_description(description)
            bar.update(1)

        for n_rows in config.rows:
            bar.set_description(f"{n_rows:,} rows: generating data")
            size = prepare_size(pipeline, n_rows, config, work)
            gate_size(pipeline, size, chosen, config, tick)
            failed = sum(not e["gate"]["ok"] for e in size["impls"].values())
            bar.update(failed * config.repeat)  # never timed
            working = sum(e["gate"]["ok"] and not e["extrapolated"] for e in size["impls"].values())
            bar.total += working * config.repeat  # one working-memory sample each per round
            bar.refresh()
            time_size(size, config, config.pipeline, tick)
            moved = size["input_bytes"] + size["output_bytes"]
            size["roofline_s"] = moved / results["bandwidth"]["bytes_per_s"]
            results["sizes"].append(size)
    return results
