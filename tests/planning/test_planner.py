"""The cost-based planner: which backend each stage gets, why, and that X never changes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fastprep.cli import calibrate
from fastprep.planning import planner


def choices(pipeline, n_rows, state, **kwargs):
    return planner.choose(
        pipeline.optimized,
        n_rows,
        profile=planner.CostProfile(),
        readiness=lambda *_: state,
        **kwargs,
    )


def by_kind(found):
    return {c.kind: c.backend for c in found}


def test_small_frames_stay_in_pandas_unless_the_kernel_is_loaded(flights_pipeline):
    # 2,000 rows: loading a fused kernel from the disk cache costs more than one run saves
    small = by_kind(choices(flights_pipeline, 2_000, planner.CACHED))
    assert small["elementwise"] == "pandas"
    assert small["encode"] == "pandas"
    # loading the hashing kernels costs more than sklearn's per-row dicts here...
    assert small["hash"] == "pandas"
    # ... but once they are loaded in this process, the kernel wins at any size
    assert by_kind(choices(flights_pipeline, 2_000, planner.READY))["hash"] == "numba"
    # numba not even imported: every stage stays in pandas, and the reason says why
    cold = choices(flights_pipeline, 2_000, planner.COLD)
    assert {c.backend for c in cold} == {"pandas"}
    assert "numba not imported yet" in cold[0].reason


def test_large_sources_go_to_numba_kernels(flights_pipeline):
    large = choices(flights_pipeline, 3_367_760, planner.CACHED)
    assert by_kind(large) == {"elementwise": "numba", "encode": "pandas", "hash": "numba"}
    elementwise = next(c for c in large if c.kind == "elementwise")
    assert elementwise.predicted["numba"] < elementwise.predicted["pandas"]
    assert "3,367,760 rows" in elementwise.reason and "predicted" in elementwise.reason
    # a kernel never compiled: compiling (3 s) does not pay at 3.4M rows for this stage
    fresh = by_kind(choices(flights_pipeline, 3_367_760, planner.COMPILE))
    assert fresh["elementwise"] == "pandas"
    # ... but it does at 100M rows
    assert (
        by_kind(choices(flights_pipeline, 100_000_000, planner.COMPILE))["elementwise"] == "numba"
    )


def test_forced_backend_is_honoured_and_shown(flights_pipeline, flights_sample):
    forced = choices(flights_pipeline, 3_367_760, planner.READY, forced="pandas")
    assert {c.backend for c in forced} == {"pandas"} and all(c.forced for c in forced)
    out = flights_pipeline.fit_transform(flights_sample, backend="numba")
    assert out.report.backend == "numba"
    assert {entry["backend"] for entry in out.report.plan} == {"numba"}
    assert all(entry["reason"] == "numba: forced" for entry in out.report.plan)


@pytest.mark.parametrize("favour", ["pandas", "numba"])
def test_every_choice_gives_the_same_X(
    flights_pipeline, flights_sample, favour, tmp_path, monkeypatch
):
    cheap = {
        "numba_row_unit_seconds": 0.0,
        "numba_stage_seconds": 0.0,
        "numba_compile_seconds": 0.0,
        "numba_cache_load_seconds": 0.0,
        "numba_import_seconds": 0.0,
    }
    dear = {"numba_row_unit_seconds": 1.0, "numba_hash_row_unit_seconds": 1.0}
    profile = planner.CostProfile.from_dict(cheap if favour == "numba" else dear)
    monkeypatch.setenv(
        "FASTPREP_COST_PROFILE", str(planner.save_profile(profile, tmp_path / "p.json"))
    )
    auto = flights_pipeline.fit_transform(flights_sample, backend="auto")
    picked = {entry["backend"] for entry in auto.report.plan}
    assert picked == ({"numba", "pandas"} if favour == "numba" else {"pandas"})  # encode: pandas
    assert auto.report.backend.startswith("auto (")
    reference = flights_pipeline.fit_transform(flights_sample, backend="pandas")
    assert (auto.X != reference.X).nnz == 0
    np.testing.assert_array_equal(auto.y, reference.y)
    np.testing.assert_array_equal(auto.row_ids, reference.row_ids)
    for entry in auto.report.plan:  # every stage's measured time is recorded
        assert set(entry["measured_seconds"]) == {"fit", "transform"}


def test_explain_with_a_source_and_analyze(flights_pipeline, flights_sample):
    text = flights_pipeline.explain(flights_sample)
    assert "backends for" in text and "stage 0:" in text and "predicted" in text
    assert "measured" not in text
    analyzed = flights_pipeline.explain(flights_sample, analyze=True)
    assert "measured: fit" in analyzed and "run: read" in analyzed


def test_profile_roundtrip_and_bad_profiles(tmp_path):
    path = planner.save_profile(
        planner.CostProfile(numba_compile_seconds=1.5, source="test"), tmp_path / "p.json"
    )
    assert planner.load_profile(path).numba_compile_seconds == 1.5
    path.write_text(json.dumps({"numba_compile_seconds": -1}))
    with pytest.raises(ValueError, match="numba_compile_seconds"):
        planner.CostProfile.from_dict(json.loads(path.read_text()))
    assert planner.load_profile(path) == planner.CostProfile()  # unreadable: the defaults
    assert planner.load_profile(tmp_path / "missing.json") == planner.CostProfile()


def test_calibrate_measures_every_constant(tmp_path):
    profile = calibrate.calibrate(sizes=(4_000, 40_000), repeat=1)
    # (the reference hasher works on distinct tokens too: either may be the faster one)
    assert profile.pandas_hash_row_unit_seconds > 0 and profile.numba_hash_row_unit_seconds > 0
    assert profile.pandas_row_unit_seconds > 0 and profile.numba_compile_seconds > 0
    assert profile.source.startswith("fastprep calibrate on ")
    path = planner.save_profile(profile, tmp_path / "p.json")
    assert planner.load_profile(path) == profile


def test_hash_kernels_count_as_loaded_only_after_their_first_call(flights_pipeline, flights_sample):
    pytest.importorskip("numba")
    from fastprep.backends import stages as stage_backends

    flights_pipeline.fit_transform(flights_sample, backend="numba")  # runs the murmur kernels
    assert stage_backends.hash_readiness() == planner.READY
    profile = planner.CostProfile()
    loaded = planner.predict(profile, "hash", 2, 1_000, planner.READY)["numba"]
    cached = planner.predict(profile, "hash", 2, 1_000, planner.CACHED)["numba"]
    assert cached - loaded == pytest.approx(profile.numba_hash_load_seconds)


def test_a_kernel_left_unloaded_is_loaded_once_waiting_cost_as_much(flights_pipeline):
    """Rent or buy: at 20k rows one run never pays for loading the fused kernel from the
    disk cache, but a process that keeps running the pipeline on pandas gives up the
    predicted difference each time; once that adds up to the load cost, numba is chosen."""
    plan = flights_pipeline.optimized
    profile = planner.CostProfile()

    def run():
        found = planner.choose(plan, 20_000, profile=profile, readiness=lambda *_: planner.CACHED)
        planner.note_run(found)
        return found

    first = run()
    fused = next(c for c in first if c.kind == "elementwise")
    assert fused.backend == "pandas" and fused.one_time == pytest.approx(
        profile.numba_cache_load_seconds
    )
    saving = fused.predicted["pandas"] - (fused.predicted["numba"] - fused.one_time)
    assert saving > 0
    runs = 1
    while next(c for c in run() if c.kind == "elementwise").backend == "pandas":
        runs += 1
        assert runs < 1000
    # it switched on the first run where the load cost not yet repaid was below one
    # run's saving (ties stay on pandas)
    assert runs == int(np.floor(profile.numba_cache_load_seconds / saving + 1e-9))
    switched = next(c for c in run() if c.kind == "elementwise")
    assert switched.backend == "numba" and "repaid by earlier runs" in switched.reason
    # explaining (choose without a run) never moves the ledger; forced runs do not either
    planner.reset_amortization()
    for _ in range(50):
        planner.choose(plan, 20_000, profile=profile, readiness=lambda *_: planner.CACHED)
        planner.note_run(
            planner.choose(
                plan, 20_000, profile=profile, readiness=lambda *_: planner.CACHED, forced="pandas"
            )
        )
    assert next(c for c in run() if c.kind == "elementwise").backend == "pandas"


def test_auto_runs_in_one_process_move_to_the_kernel(flights_pipeline, flights_sample):
    """Real runs: the ledger is fed by fit_transform itself; X never changes."""
    pytest.importorskip("numba")
    reference = flights_pipeline.fit_transform(flights_sample, backend="pandas")
    backends = []
    for _ in range(40):
        out = flights_pipeline.fit_transform(flights_sample, backend="auto")
        assert (out.X != reference.X).nnz == 0
        backends.append(out.report.plan[0]["backend"])
        if backends[-1] == "numba":
            break
    assert backends[-1] == "numba"


def test_report_names_only_the_helper_paths_of_its_own_run(flights_sample) -> None:
    import fastprep as fp

    schema = fp.Schema.infer(flights_sample)
    hashed = [fp.col("dest") >> fp.Hash(n_features=16), fp.col("distance") >> fp.Standardize()]
    first = fp.Pipeline(schema=schema, features=hashed).fit_transform(flights_sample)
    assert "csr" in first.report.backend
    numeric = [fp.col("distance") >> fp.Standardize()]
    second = fp.Pipeline(schema=schema, features=numeric).fit_transform(flights_sample)
    assert "csr" not in second.report.backend and "text" not in second.report.backend


def test_compile_ledger_survives_concurrent_threads(tmp_path, monkeypatch) -> None:
    """Dask worker threads record kernel choices at once: the ledger on disk must stay
    whole, with every thread's entry, and no thread may fail mid-save."""
    import sys
    import threading

    monkeypatch.setenv("FASTPREP_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(planner, "_DISK", {f"old{i}": 1.0 for i in range(2_000)})
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, as busy workers do
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def work(number: int) -> None:
        start.wait()
        try:
            for i in range(40):
                planner._add_forgone(f"t{number}-{i}", 1.0)
                planner._save_forgone()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sys.setswitchinterval(switch)
    assert errors == []
    saved = json.loads((tmp_path / "kernels" / "forgone.json").read_text())
    assert all(f"t{n}-39" in saved for n in range(6))
    assert list(tmp_path.joinpath("kernels").glob("*.tmp*")) == []


def test_helper_rates_are_saved_once_when_the_process_ends(tmp_path) -> None:
    """A run notes several helpers; the ledger file is written at exit, not after each."""
    import os
    import subprocess
    import sys

    code = (
        "from fastprep.planning import planner; "
        "planner.note_helper('scan', 10**7, 0.5); planner.note_helper('text', 10**7, 0.25); "
        "import pathlib, os; "
        "print(pathlib.Path(os.environ['FASTPREP_CACHE_DIR'], 'kernels', 'forgone.json').exists())"
    )
    env = {**os.environ, "FASTPREP_CACHE_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert result.stdout.strip() == "False"  # not yet written while the process runs
    saved = json.loads((tmp_path / "kernels" / "forgone.json").read_text())
    assert saved["rate:helper:scan"] == pytest.approx(0.5 / 10**7)
    assert saved["rate:helper:text"] == pytest.approx(0.25 / 10**7)


def test_dask_cost_model_shares_tasks_and_rows_but_not_the_scheduler() -> None:
    profile = planner.CostProfile(
        dask_cluster_start_seconds=3.0, dask_job_seconds=0.5, dask_task_seconds=0.1,
        dask_scheduler_task_seconds=0.01, dask_row_seconds=1e-6, dask_pass_latency_seconds=0.0,
    )  # fmt: skip
    # 8 tasks of 1M rows in all on 2 workers: (8 x 0.1 + 1.0) / 2 + 8 x 0.01
    assert planner.dask_pass_seconds(profile, 1_000_000, 8, 2) == pytest.approx(0.98)
    # more workers than tasks: only the tasks' workers are busy
    assert planner.dask_pass_seconds(profile, 1_000_000, 1, 4) == pytest.approx(1.11)
    # a job: the client's fixed work, then each pass; the LocalCluster's start when asked
    three = planner.dask_job_seconds(profile, 1_000_000, 8, 2, passes=3)
    assert three == pytest.approx(0.5 + 3 * 0.98)
    started = planner.dask_job_seconds(profile, 1_000_000, 8, 2, passes=3, start=True)
    assert started == pytest.approx(three + 3.0)
