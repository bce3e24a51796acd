"""``TargetEncode``/``CountEncode`` fitted on partitions — a real Dask cluster and the
streamed fit in one process — give the single-process state bit for bit, and the same X
by ``transform``, ``batches`` and ``write_shards``. A partitioned ``fit_transform`` gives
each fitted row its out-of-fold encoding, as the in-memory one (the folds over all rows)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from support import REPO, streaming_budget

import fastprep as fp
from fastprep.runtime import aggregates as agg
from fastprep.runtime import streamed

SCHEMA = fp.Schema(
    {
        "arr_delay": fp.Float(nullable=True),
        "carrier": fp.Category(),
        "tailnum": fp.String(nullable=True),
        "dest": fp.String(),
        "hour": fp.Int(),
    }
)


def _pipeline(target="late") -> fp.Pipeline:
    return fp.Pipeline(
        SCHEMA,
        [
            fp.cols("carrier", "tailnum", "hour") >> fp.TargetEncode(),
            fp.col("dest") >> fp.FillMissing("UNK") >> fp.TargetEncode(smooth=4.0, cv=3),
            fp.cols("tailnum", "hour") >> fp.CountEncode(),
            fp.col("dest") >> fp.CountEncode(normalize=True),
        ],
        target=fp.expr("late = arr_delay > 15") if target == "late" else target,
    )


def _same_state(a, b) -> None:
    for fa, fb in zip(a.params, b.params, strict=True):
        for name in fa:
            for sa, sb in zip(fa[name], fb[name], strict=True):
                assert sa.keys() == sb.keys(), name
                for key in sa:
                    if isinstance(sa[key], np.ndarray):
                        np.testing.assert_array_equal(sa[key], sb[key])
                    else:
                        assert sa[key] == sb[key], (name, key)


@pytest.mark.parametrize("target", ["late", "arr_delay"])
def test_cluster_fit_equals_single_process(flights_row_groups, client, target) -> None:
    pipeline = _pipeline(target)
    single = pipeline.fit(flights_row_groups)
    dist = pipeline.fit(flights_row_groups, client=client, rows_per_partition=5_000)
    _same_state(single, dist)
    x_single = single.transform(flights_row_groups).X
    x_dist = dist.transform(flights_row_groups, client=client, rows_per_partition=5_000).X
    np.testing.assert_array_equal(x_single, x_dist)


def test_streamed_fit_batches_and_shards_equal_single_process(flights_row_groups, tmp_path):
    pipeline = _pipeline()
    single = pipeline.fit(flights_row_groups)
    params, _ = streamed.fit(
        pipeline.optimized, pipeline.schema, str(flights_row_groups), rows_per_partition=2_500
    )
    _same_state(single, fp.FittedPipeline(pipeline, params))
    expected = single.transform(flights_row_groups)
    batches = list(single.batches(flights_row_groups, batch_size=4_096, rows_per_partition=3_000))
    np.testing.assert_array_equal(np.concatenate([X for X, _ in batches]), expected.X)
    single.write_shards(flights_row_groups, tmp_path / "shards", rows_per_partition=3_000)
    np.testing.assert_array_equal(
        np.asarray(fp.open_output(tmp_path / "shards").whole().X), expected.X
    )


def _same_output(opened, whole) -> None:
    """A partitioned fit_transform's shards are the in-memory fit_transform's X, bit for
    bit (the same rows, each with its out-of-fold encoding)."""
    gathered = opened.whole()
    np.testing.assert_array_equal(np.asarray(gathered.row_ids), whole.row_ids)
    np.testing.assert_array_equal(np.asarray(gathered.X), whole.X)


@pytest.mark.parametrize("target", ["late", "arr_delay"])
def test_streamed_fit_transform_cross_fits_as_in_memory(flights_row_groups, tmp_path, target):
    """Under a memory budget the fit_transform streams; each fitted row still gets the
    encoding of its fold over all the rows (the peer's StratifiedKFold / KFold)."""
    from sklearn.model_selection import KFold, StratifiedKFold
    from sklearn.preprocessing import TargetEncoder

    pipeline = _pipeline(target)
    whole = pipeline.fit_transform(flights_row_groups)
    budget = streaming_budget(pipeline, str(flights_row_groups))
    fitted, opened = pipeline.fit_and_transform(
        flights_row_groups, memory_budget=budget, output_dir=tmp_path / "o"
    )
    assert fitted.fit_report.backend == "streamed" and len(opened) >= 2
    _same_output(opened, whole)
    _same_state(pipeline.fit(flights_row_groups), fitted)
    # the peer, on the rows the fit saw
    frame = pd.read_parquet(flights_row_groups).iloc[np.asarray(opened.whole().row_ids)]
    binary = target == "late"
    y = (frame.arr_delay > 15) if binary else frame.arr_delay
    splitter = (StratifiedKFold if binary else KFold)(5, shuffle=True, random_state=0)
    kind = "binary" if binary else "continuous"
    columns = ["carrier", "tailnum", "hour"]
    peer_input = frame[columns].astype(object)
    expected = TargetEncoder(target_type=kind, cv=splitter).fit_transform(
        peer_input.where(peer_input.notna(), np.nan), y
    )
    got = np.asarray(opened.whole().X)[:, :3]
    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=1e-6, atol=0)


def test_cluster_fit_transform_cross_fits_as_in_memory(flights_row_groups, client, tmp_path):
    pipeline = _pipeline()
    whole = pipeline.fit_transform(flights_row_groups)
    fitted, opened = pipeline.fit_and_transform(
        flights_row_groups, client=client, rows_per_partition=5_000, output_dir=tmp_path / "o"
    )
    assert len(opened) == 4
    _same_output(opened, whole)
    _same_state(pipeline.fit(flights_row_groups), fitted)
    # a plain transform of the same rows on the cluster: the full-data encodings, another
    # output (never taken for the cross-fitted shards when resuming into the folder)
    fitted.transform(flights_row_groups, client=client, rows_per_partition=5_000,
                     output_dir=tmp_path / "o")  # fmt: skip
    again = np.asarray(fp.open_output(tmp_path / "o").whole().X)
    np.testing.assert_array_equal(again, fitted.transform(flights_row_groups).X)


def test_cli_run_on_a_scheduler_cross_fits(flights_row_groups, client, tmp_path) -> None:
    """``fastprep run --scheduler`` is a fit_transform on that cluster: out of fold."""
    pipeline_file = tmp_path / "te.py"
    pipeline_file.write_text(
        "import fastprep as fp\n"
        "pipeline = fp.Pipeline(fp.Schema({'arr_delay': fp.Float(nullable=True), "
        "'carrier': fp.Category(), 'dest': fp.String()}),\n"
        "    [fp.cols('carrier', 'dest') >> fp.TargetEncode(cv=4, seed=3)],\n"
        "    target=fp.expr('late = arr_delay > 15'))\n"
    )
    subprocess.run(
        [sys.executable, "-m", "fastprep", "run", str(pipeline_file), "--input",
         str(flights_row_groups), "--output", str(tmp_path / "out"), "--scheduler",
         client.scheduler.address, "--no-progress"],
        check=True, capture_output=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    same = fp.Pipeline(
        fp.Schema({"arr_delay": fp.Float(nullable=True), "carrier": fp.Category(),
                   "dest": fp.String()}),
        [fp.cols("carrier", "dest") >> fp.TargetEncode(cv=4, seed=3)],
        target=fp.expr("late = arr_delay > 15"),
    )  # fmt: skip
    _same_output(fp.open_output(tmp_path / "out"), same.fit_transform(flights_row_groups))


def test_a_target_gather_above_the_cap_is_refused(flights_row_groups, client, monkeypatch):
    monkeypatch.setattr(agg, "MAX_GATHERED_VALUES", 1_000)
    with pytest.raises(fp.FitError, match=r"TargetEncode\(\) on 'carrier'.*without client="):
        _pipeline().fit(flights_row_groups, client=client, rows_per_partition=5_000)


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_cluster_transform_of_rows_without_the_target(flights_row_groups, client, tmp_path, kind):
    """New rows to predict on (no ``arr_delay``), as CSV or Parquet: the tasks transform
    them with the fitted encodings and no y, as one process does."""
    fitted = _pipeline().fit(flights_row_groups)
    new = pd.read_parquet(flights_row_groups).drop(columns=["arr_delay"])
    path = tmp_path / f"new.{kind}"
    new.to_csv(path, index=False) if kind == "csv" else new.to_parquet(path)
    out = fitted.transform(str(path), client=client, rows_per_partition=5_000)
    single = fitted.transform(new)
    assert out.y is None and single.y is None
    np.testing.assert_array_equal(out.X, single.X)
