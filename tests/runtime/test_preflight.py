"""Memory pre-flight and execution choice on real flights data: small / large /
high-cardinality / larger-than-budget inputs, refusals before loading, per-feature pins, and
that every choice gives the same X as ``backend="pandas"``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from support import streaming_budget

import fastprep as fp
from fastprep.errors import BackendError, MemoryBudgetError, PipelineDefinitionError
from fastprep.planning import planner
from fastprep.runtime import preflight
from fastprep.runtime import route as auto_cluster


def assert_same_matrix(a, b) -> None:
    """Same layout, dtype, shape and bits (a local copy: ``conftest`` names clash in a full
    run)."""
    assert sp.issparse(a) == sp.issparse(b) and a.dtype == b.dtype and a.shape == b.shape
    if sp.issparse(a):
        for part in ("indptr", "indices", "data"):
            assert np.array_equal(getattr(a, part), getattr(b, part))
    else:
        assert np.array_equal(a, b, equal_nan=True)


@pytest.fixture(scope="module")
def grouped_parquet(tmp_path_factory, _flights_sample_cached):
    """The real 20,000-row sample as Parquet with 5,000-row row groups (4 partitions)."""
    path = tmp_path_factory.mktemp("preflight") / "flights.parquet"
    _flights_sample_cached.to_parquet(path, row_group_size=5_000)
    return str(path)


def tailnum_pipeline(flights_pipeline, **onehot):
    """The flights schema with a one-hot of the ~3,200 tail numbers (high cardinality)."""
    return fp.Pipeline(
        flights_pipeline.schema,
        [
            fp.col("distance") >> fp.Log1p() >> fp.Standardize(),
            fp.cols("tailnum") >> fp.OneHot(**onehot),
        ],
        target=fp.expr("late = arr_delay > 15"),
    )


def test_cardinality_sketch_matches_the_real_counts(flights_sample, grouped_parquet):
    for column in ("tailnum", "dest", "carrier"):
        true = flights_sample[column].nunique()
        for source in (flights_sample, grouped_parquet):
            card = preflight.cardinality(source, column)
            assert abs(card.estimate - true) <= 3 * card.relative_error * true, (column, source)
            assert not card.lower_bound
    # four row groups' sketches merged = the one-row-group file's sketch (mergeable)
    one_group = preflight.cardinality("data_samples/flights.parquet", "tailnum")
    assert one_group.estimate == preflight.cardinality(grouped_parquet, "tailnum").estimate


def test_csv_head_gives_a_lower_bound(flights_csv, monkeypatch):
    monkeypatch.setattr(preflight, "CSV_SAMPLE_ROWS", 1_000)
    card = preflight.cardinality(str(flights_csv), "tailnum")
    assert card.lower_bound and card.describe().startswith("≥")
    assert card.estimate < pd.read_csv(flights_csv, usecols=["tailnum"])["tailnum"].nunique()


def test_budget_sources_and_parsing(monkeypatch):
    assert preflight.parse_bytes("2GB") == 2 * 10**9
    assert preflight.parse_bytes("512 MiB") == 512 * 2**20
    with pytest.raises(PipelineDefinitionError, match="'2 parsecs'"):
        preflight.parse_bytes("2 parsecs")
    monkeypatch.setenv("FASTPREP_MEMORY_BUDGET", "3MB")
    assert preflight.memory_budget() == (3 * 10**6, "$FASTPREP_MEMORY_BUDGET")
    assert preflight.memory_budget("1kB")[0] == 1000  # the argument wins
    monkeypatch.delenv("FASTPREP_MEMORY_BUDGET")
    budget, where = preflight.memory_budget(profile=planner.CostProfile(memory_headroom=0.5))
    assert 0 < budget <= preflight.available_memory() * 0.5 + 1 and "less 50%" in where


@pytest.mark.parametrize("size", ["2G", "512M", "8Gi", "1e9", "1.5GB", "2 GiB", "100",
                                  "512MiB", "3kb", "1Ti"])  # fmt: skip
def test_budget_sizes_read_as_dask_reads_them(size):
    """A memory size written for Dask (``memory_limit="2G"``) or Kubernetes (``8Gi``)
    means the same bytes here."""
    from dask.utils import parse_bytes

    assert preflight.parse_bytes(size) == parse_bytes(size)


@pytest.mark.parametrize(
    "bad", ["1.2.3GB", "1e400", "2 parsecs", ".", "..MB", float("nan"), float("inf"), 0.25, -5]
)
def test_a_malformed_budget_is_refused_never_ignored(bad, flights_pipeline, flights_sample):
    """A budget that is no number of bytes is the caller's error: the run never goes on
    as if no budget had been given (nor fails inside a conversion)."""
    with pytest.raises(PipelineDefinitionError, match="budget"):
        preflight.parse_bytes(bad)
    with pytest.raises(PipelineDefinitionError, match="budget"):
        flights_pipeline.fit_transform(flights_sample, memory_budget=bad)


def test_small_source_stays_in_memory(flights_pipeline, flights_sample):
    pre = preflight.run_preflight(flights_pipeline.optimized, flights_pipeline.schema,
                                  "data_samples/flights.parquet", budget="1GB")  # fmt: skip
    assert pre.n_rows == 20_000 and pre.rows_exact and pre.fits
    assert pre.execution == "in-memory"
    assert pre.output_layout == "csr"  # the Hash block makes X CSR
    # the predicted peak is the right order: the real run's X alone is a good part of it
    out = flights_pipeline.fit_transform(flights_sample, backend="pandas")
    X = out.X
    assert X.data.nbytes + X.indices.nbytes <= pre.output_bytes <= 4 * (X.data.nbytes + 8e5)


def test_large_source_goes_to_dask_when_predicted_faster(flights_pipeline, grouped_parquet):
    # with many workers' worth of cheap Dask rows, 3.4M rows are predicted faster on Dask
    profile = replace(planner.CostProfile(), run_row_seconds=3e-6, dask_row_seconds=1e-7)
    big = preflight.Preflight(3_367_760, True, "parquet", 0, 0, 0, "csr", 10**12, "test")
    preflight._execution_decision(big, grouped_parquet, profile, distributable=True)
    assert big.execution == "dask"
    assert "3.23 s" not in big.decisions[-1].reason and "~" in big.decisions[-1].reason
    small = preflight.Preflight(20_000, True, "parquet", 0, 0, 0, "csr", 10**12, "test")
    preflight._execution_decision(small, grouped_parquet, profile, distributable=True)
    assert small.execution == "in-memory"  # the cluster's start-up does not pay


def test_the_budget_counts_every_process_of_the_job(flights_pipeline, grouped_parquet):
    """The interpreter's own memory and a local cluster's scheduler, nannies and workers are
    part of the peak the budget bounds; explain shows every option with its numbers."""
    plan, schema = flights_pipeline.optimized, flights_pipeline.schema
    pre = preflight.run_preflight(plan, schema, grouped_parquet, budget="2GB")
    memory, streamed, cluster = pre.options
    assert streamed.name == "streamed in this process"
    assert memory.peak_bytes > preflight.PROCESS_BASE_BYTES
    assert cluster.peak_bytes > 3 * preflight.PROCESS_BASE_BYTES  # client + 2 workers
    assert pre.passes == 2  # FillMissing("median") >> Standardize: 2 fit passes
    low = preflight.run_preflight(plan, schema, grouped_parquet, budget="100MB")
    refused = [d for d in low.decisions if d.refuse]
    assert refused and "smallest budget that would work" in refused[0].reason
    assert low.minimum_budget > preflight.PROCESS_BASE_BYTES
    text = flights_pipeline.explain(grouped_parquet, memory_budget="2GB")
    assert "streamed in this process:" in text and "local Dask cluster of" in text
    assert "peak ~" in text and "rows" in text


def test_high_cardinality_onehot_is_csr_and_says_why(flights_pipeline, flights_sample):
    pipeline = tailnum_pipeline(flights_pipeline)
    pre = preflight.run_preflight(pipeline.optimized, pipeline.schema, flights_sample,
                                  budget="4MB")  # fmt: skip
    onehot = next(d for d in pre.decisions if d.subject == "onehot(tailnum)")
    assert onehot.choice == "CSR" and "categories × 20,000 rows dense" in onehot.reason
    assert "> budget 4 MB" in onehot.reason and pre.output_layout == "csr"
    text = pipeline.explain(flights_sample, memory_budget="1GB")
    assert "onehot(tailnum): ~3," in text and "→ CSR" in text
    out = pipeline.fit_transform(flights_sample)
    assert out.report.output["layout"] == "csr"
    assert_same_matrix(out.X, pipeline.fit_transform(flights_sample, backend="pandas").X)


def test_declared_dense_onehot_over_budget_is_refused_before_loading(
    flights_pipeline, grouped_parquet
):
    pipeline = tailnum_pipeline(flights_pipeline, sparse=False)
    with pytest.raises(MemoryBudgetError, match=r"X \(dense\) ~2\d\d MB \+ ~2\d\d MB for the "
                       r"process > budget 450 MB") as exc:  # fmt: skip
        pipeline.fit_transform(grouped_parquet, memory_budget="450MB")
    assert "sparse=None would give CSR" in str(exc.value) and "write_shards" in str(exc.value)
    # the fit alone needs no X: it runs, and the layout stays the declared dense one
    fitted = pipeline.fit(grouped_parquet, memory_budget="450MB")
    assert fitted.fit_report.rows_out == 19_430


def test_vocabulary_over_budget_recommends_hashing(flights_pipeline, flights_sample):
    pipeline = tailnum_pipeline(flights_pipeline)
    pre = preflight.run_preflight(pipeline.optimized, pipeline.schema, flights_sample,
                                  budget="200kB", whole_output=False)  # fmt: skip
    refused = [d for d in pre.decisions if d.refuse]
    assert refused[0].subject == "vocabulary(tailnum)"
    assert "fp.Hash(n_features=2**12)" in refused[0].reason
    assert "not automatic" in refused[0].reason


def test_larger_than_budget_runs_on_dask_partitions_with_the_same_X(
    flights_pipeline, grouped_parquet, tmp_path
):
    distributed = pytest.importorskip("distributed")
    # + a column constant in the sample: a finding the fit alone makes (its alert must come)
    flights_pipeline = fp.Pipeline(
        fp.Schema({**dict(flights_pipeline.schema.items()), "year": fp.Int()}),
        [*flights_pipeline.plan.features, fp.col("year") >> fp.Standardize()],
        target=fp.expr("late = arr_delay > 15"), name="flights",
    )  # fmt: skip
    budget = str(streaming_budget(flights_pipeline, grouped_parquet))
    reference = flights_pipeline.fit_transform(grouped_parquet, backend="pandas")
    alerts: list = []
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=":0") as cluster:  # fmt: skip
        address = cluster.scheduler_address
        # X over the budget is never gathered: refused, naming output_dir=
        with pytest.raises(MemoryBudgetError, match="output_dir="):
            flights_pipeline.fit_transform(grouped_parquet, memory_budget=budget,
                                           scheduler=address)  # fmt: skip
        out = flights_pipeline.fit_transform(grouped_parquet, memory_budget=budget,
                                             scheduler=address, output_dir=tmp_path / "a",
                                             on_alert=alerts.append)  # fmt: skip
        rules = [a.rule for a in alerts]
        assert "year:constant" in rules and len(rules) == len(set(rules))
        fitted = flights_pipeline.fit(grouped_parquet, memory_budget=budget, scheduler=address)
        fitted.transform(grouped_parquet, memory_budget=budget, scheduler=address,
                         output_dir=tmp_path / "b")  # fmt: skip
    note = out.notes[-1]
    assert "Dask partitions" in note and "never loaded whole" in note
    assert "fit level" not in note and "Dask partitions" in fitted.fit_report.notes[-1]
    for result in (out, fp.open_output(tmp_path / "b")):
        whole = result.whole()
        assert_same_matrix(whole.X, reference.X)
        assert np.array_equal(whole.y, reference.y)
        assert np.array_equal(whole.row_ids, reference.row_ids)
    # opted out of Dask: streamed in this process instead, same output
    off = flights_pipeline.fit_transform(grouped_parquet, memory_budget=budget,
                                         scheduler="off", output_dir=tmp_path / "c")  # fmt: skip
    assert "streamed in this process" in off.notes[-1]
    assert_same_matrix(off.whole().X, reference.X)


@pytest.mark.slow
def test_auto_started_local_cluster(flights_pipeline, grouped_parquet, tmp_path, monkeypatch):
    """scheduler="local" and an in-memory run over the budget: the planner starts a
    LocalCluster of worker processes (its four processes fit 3 GB; the 20,000 rows are
    made to look too big for memory through the cost model's working copies)."""
    pytest.importorskip("distributed")
    reference = flights_pipeline.fit_transform(grouped_parquet, backend="pandas")
    heavy = replace(planner.CostProfile(), memory_working_copies=1e4)
    monkeypatch.setattr(preflight, "load_profile", lambda: heavy)
    out = flights_pipeline.fit_transform(grouped_parquet, memory_budget="3GB",
                                         scheduler="local", output_dir=tmp_path)  # fmt: skip
    assert "LocalCluster of" in out.notes[-1]
    assert_same_matrix(out.whole().X, reference.X)


def test_scheduler_setting_precedence(monkeypatch):
    monkeypatch.delenv("FASTPREP_SCHEDULER", raising=False)
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://10.0.0.1:8786")
    assert auto_cluster.scheduler_setting(None) == "tcp://10.0.0.1:8786"
    monkeypatch.setenv("FASTPREP_SCHEDULER", "off")
    assert auto_cluster.scheduler_setting(None) == "off"
    assert auto_cluster.scheduler_setting("local") == "local"


def _pinned_pipeline(flights_pipeline):
    return fp.Pipeline(
        flights_pipeline.schema,
        [
            fp.col("distance") >> fp.Log1p() >> fp.Standardize(),
            (fp.cols("dep_delay") >> fp.FillMissing(0) >> fp.Clip(-60, 600)).backend("pandas"),
            fp.expr("speed = distance / air_time * 60") >> fp.FillMissing("median"),
            fp.cols("origin", "carrier") >> fp.OneHot(),
            (fp.cols("tailnum", "dest") >> fp.Hash(n_features=2**18)).backend("pandas"),
        ],
        target=fp.expr("late = arr_delay > 15"),
    )


def test_pinned_features_keep_their_backend_and_the_same_X(
    flights_pipeline, flights_sample, tmp_path
):
    pytest.importorskip("numba")
    pipeline = _pinned_pipeline(flights_pipeline)
    stages = pipeline.optimized.execution_stages()
    assert [s.features for s in stages if s.kind == "fused"] == [(0, 2), (1,)]  # split by pin
    reference = pipeline.fit_transform(flights_sample, backend="pandas")
    for backend in ("auto", "numba"):
        out = pipeline.fit_transform(flights_sample, backend=backend)
        assert_same_matrix(out.X, reference.X)
        pinned = [e for e in out.report.plan if "(.backend('pandas'))" in e["reason"]]
        assert {e["stage"] for e in pinned} == {1, 3} and all(e["forced"] for e in pinned)
        assert {e["backend"] for e in pinned} == {"pandas"}
    numba_run = {e["stage"]: e["backend"] for e in out.report.plan}
    assert numba_run[0] == "numba" and numba_run[2] == "numba"  # the global choice elsewhere
    text = pipeline.explain(flights_sample)
    assert "[backend=pandas]" in text and "forced on tailnum, dest (.backend('pandas'))" in text
    # the pin is part of the saved state
    fitted = pipeline.fit(flights_sample)
    fitted.save(tmp_path / "state.zip")
    loaded = fp.load(tmp_path / "state.zip")
    assert [f.backend for f in loaded.pipeline.plan.features][:2] == [None, "pandas"]
    assert_same_matrix(loaded.transform(flights_sample).X, reference.X)


def test_pinning_to_an_unknown_backend_fails_clearly(flights_pipeline, flights_sample):
    with pytest.raises(PipelineDefinitionError, match="name a backend"):
        fp.col("distance").backend("auto")
    pipeline = fp.Pipeline(flights_pipeline.schema,
                           [(fp.col("distance") >> fp.Log1p()).backend("cuda")])  # fmt: skip
    with pytest.raises(BackendError, match="unknown backend 'cuda'"):
        pipeline.fit(flights_sample)


def test_a_collected_query_counts_as_resident_like_its_table(flights_pipeline) -> None:
    """A LazyFrame or filtered Dataset is collected before routing: the budget must count
    that table as memory already in use, exactly as for the same pyarrow Table."""
    import pyarrow.parquet as pq

    from fastprep.data.sources import collect_once

    plan, schema = flights_pipeline.optimized, flights_pipeline.schema
    table = pq.read_table("data_samples/flights.parquet")
    columns = schema.read_columns(plan.columns)
    collected = collect_once(table.to_pandas().pipe(__import__("polars").from_pandas).lazy(),
                             columns)  # fmt: skip
    direct = preflight.run_preflight(plan, schema, table.select(columns), budget="2GB")
    lazy = preflight.run_preflight(plan, schema, collected, budget="2GB")
    assert lazy.input_bytes == pytest.approx(direct.input_bytes, rel=0.05)
    assert [o.peak_bytes for o in lazy.options] == pytest.approx(
        [o.peak_bytes for o in direct.options], rel=0.05
    )


def test_a_fitted_transform_is_planned_without_the_fits_passes(grouped_parquet):
    """A fitted pipeline's transform reads each partition once: neither the fit's passes
    (in the predicted time and the words of the choice) nor the values a streamed fit
    keeps for its medians (in the predicted peak) are counted."""
    pipeline = fp.Pipeline(
        fp.Schema({"dep_delay": fp.Float(nullable=True), "air_time": fp.Float(nullable=True)}),
        [fp.cols("dep_delay", "air_time") >> fp.FillMissing("median") >> fp.Standardize()],
    )
    plan, schema = pipeline.optimized, pipeline.schema
    both = auto_cluster.check(plan, schema, grouped_parquet, budget="100GB", whole_output=False)
    only = auto_cluster.check(plan, schema, grouped_parquet, budget="100GB", whole_output=False,
                              transform_only=True)  # fmt: skip
    assert both.passes >= 2 and only.passes == 0
    streamed = [next(o for o in r.options if o.name.startswith("streamed")) for r in (both, only)]
    assert streamed[0].kept_bytes > 0 and streamed[1].kept_bytes == 0
    assert streamed[1].peak_bytes < streamed[0].peak_bytes
    assert all(a.seconds > b.seconds for a, b in zip(both.options[1:], only.options[1:]))
    # the choice over the budget says what runs
    budget = streaming_budget(pipeline, grouped_parquet)
    pre = auto_cluster.check(plan, schema, grouped_parquet, budget=budget, whole_output=False,
                             transform_only=True)  # fmt: skip
    assert pre.execution == "streamed"
    assert "fit pass" not in pre.decisions[-1].choice and "transform" in pre.decisions[-1].choice


def test_a_lookups_side_table_is_counted_in_the_budget(tmp_path):
    """A side table is read, validated and indexed in the calling process (and held by
    every process that joins it): its memory is the job's too. A 400,000-row table made a
    streamed job predicted under its budget peak well above it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    n_side = 400_000
    pq.write_table(pa.table({"k": np.arange(n_side), "a": rng.random(n_side),
                             "b": rng.random(n_side)}), tmp_path / "side.parquet")  # fmt: skip
    pq.write_table(pa.table({"k": rng.integers(0, n_side, 10_000), "x": rng.random(10_000)}),
                   tmp_path / "src.parquet", row_group_size=2_000)  # fmt: skip
    side = fp.Lookup(str(tmp_path / "side.parquet"), key={"k": "k"},
                     schema=fp.Schema({"k": fp.Int(), "a": fp.Float(), "b": fp.Float()}))  # fmt: skip
    source = fp.Schema({"k": fp.Int(), "x": fp.Float()})
    joined = fp.Pipeline(source, [fp.cols("side.a", "side.b", "x") >> fp.Standardize()],
                         lookups={"side": side})  # fmt: skip
    alone = fp.Pipeline(source, [fp.cols("x") >> fp.Standardize()])
    src = str(tmp_path / "src.parquet")
    with_table, without = (
        auto_cluster.check(p.optimized, p.schema, src, budget="100GB", whole_output=False)
        for p in (joined, alone)
    )
    table_bytes = n_side * 3 * 8  # the key and the two value columns, as stored
    for a, b in zip(with_table.options, without.options, strict=True):
        assert a.peak_bytes - b.peak_bytes >= preflight.LOOKUP_READ_COPIES * table_bytes
    # a fitted pipeline's transform holds the table it was fitted with (no read)
    fitted = joined.fit(src)
    again = auto_cluster.check(fitted.plan, fitted.schema, src, budget="100GB",
                               whole_output=False, transform_only=True)  # fmt: skip
    assert again.options[0].peak_bytes - without.options[0].peak_bytes >= table_bytes


def test_the_output_type_sizes_x():
    """X is made in the output's computing type: float64 output is twice float32's (a
    3.4M-row job predicted at 1.84 GB peaked at 2.3 GB with float64 under a 2.2 GB budget
    it was said to fit)."""
    from support import dense_flights_pipeline

    pipeline = dense_flights_pipeline()
    plan, schema, path = pipeline.optimized, pipeline.schema, "data_samples/flights.parquet"
    narrow, wide = (
        auto_cluster.check(plan, schema, path, budget="100GB", value_bytes=size) for size in (4, 8)
    )
    assert wide.output_bytes == 2 * narrow.output_bytes
    assert wide.options[0].peak_bytes - narrow.options[0].peak_bytes == narrow.output_bytes
    budget = int((narrow.options[0].peak_bytes + wide.options[0].peak_bytes) / 2 / 0.9)
    assert pipeline.fit_transform(path, memory_budget=budget).X.dtype == np.float32
    with pytest.raises(MemoryBudgetError):
        pipeline.fit_transform(path, memory_budget=budget, out_dtype="float64")


@pytest.mark.parametrize("encoder", ["hash", "onehot"])
def test_tags_are_counted_by_the_tags_a_row(tmp_path, encoder):
    """A multi-valued column gives X an entry per tag, not one per row: the pre-flight
    counts the tags a row from the head of the column (text split on its separator, or a
    list column), so the predicted X is not a fraction of the real one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    vocab = np.array([f"t{i}" for i in range(300)])
    rows = [rng.choice(vocab, 12, replace=False).tolist() for _ in range(20_000)]
    pq.write_table(pa.table({"tags": ["|".join(r) for r in rows], "listed": rows}),
                   tmp_path / "tags.parquet", row_group_size=5_000)  # fmt: skip
    path = str(tmp_path / "tags.parquet")
    encode = fp.Hash(n_features=2**12) if encoder == "hash" else fp.OneHot(sparse=True)
    schema = fp.Schema({"tags": fp.String(), "listed": fp.ListOf()})
    for feature in (fp.Tags("tags", sep="|") >> encode, fp.cols("listed") >> encode):
        pipeline = fp.Pipeline(schema, [feature])
        pre = auto_cluster.check(pipeline.optimized, pipeline.schema, path, budget="100GB",
                                 whole_output=False)  # fmt: skip
        X = pipeline.fit_transform(path).X
        real = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
        assert real * 0.9 <= pre.output_bytes <= real * 1.5


def test_dict_features_are_counted_by_their_keys(flights_sample):
    """``fp.Dict`` into ``Hash`` or ``Vectorize`` gives an entry per key of a row's dict
    (and ``Vectorize`` a CSR X): counted so, from the head of the column."""
    rows = [{"carrier": c, "dest": d, "distance": float(x)} for c, d, x in
            zip(flights_sample.carrier, flights_sample.dest, flights_sample.distance)]  # fmt: skip
    frame = pd.DataFrame({"extras": rows})
    for encode in (fp.Hash(2**18), fp.Vectorize()):
        pipeline = fp.Pipeline(fp.Schema({"extras": fp.DictOf()}), [fp.Dict("extras") >> encode])
        pre = auto_cluster.check(pipeline.optimized, pipeline.schema, frame, budget="100GB",
                                 whole_output=False)  # fmt: skip
        X = pipeline.fit_transform(frame).X
        real = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
        assert pre.output_layout == "csr" and real * 0.9 <= pre.output_bytes <= real * 1.5
