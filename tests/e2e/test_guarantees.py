"""Documented guarantees that had no test of their own (the audit of README.md and docs/*.md:
see docs/guarantees.md for every guarantee and the test that holds it). One test per
guarantee, named after it, with the documentation's sentence in its docstring."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fastprep as fp
from fastprep.backends.registry import available

REPO = Path(__file__).resolve().parents[2]
BACKENDS = ["auto", *available()]


@pytest.fixture(scope="module")
def broken_frame(broken_path) -> pd.DataFrame:
    return pd.read_csv(broken_path)


def order_pipeline() -> fp.Pipeline:
    schema = fp.Schema({
        "distance": fp.Float(min=0),
        "air_time": fp.Float(nullable=True, min=0),
        "arr_delay": fp.Float(),
        "origin": fp.Category(["EWR", "JFK", "LGA"]),
    })  # fmt: skip
    return fp.Pipeline(
        schema=schema,
        features=[
            fp.col("distance"),
            fp.expr("speed = distance / air_time * 60") >> fp.FillMissing("median"),
            fp.col("origin") >> fp.OneHot(),
        ],
        target="arr_delay",
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_row_ids_are_read_only(flights_pipeline, flights_sample, broken_path, backend):
    """README: ``out.row_ids  # source position of each row of X (input order kept;
    read-only: copy to modify)`` — whether or not rows were quarantined."""
    fitted = flights_pipeline.fit(flights_sample, backend=backend)
    clean = fitted.transform(flights_sample.dropna(subset=["arr_delay"]))
    broken = fitted.transform(broken_path)
    assert clean.report.rows_quarantined == 0 and broken.report.rows_quarantined > 0
    for out in (clean, broken):
        ids = out.row_ids
        assert not ids.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            ids[0] = 99
        copied = ids.copy()
        copied[0] = 99  # a copy is the caller's
        assert out.row_ids[0] != 99 or len(ids) == 0
    out = broken
    writable = np.arange(3, dtype=np.int64)
    out.row_ids = writable  # assigned by a caller: still handed out read-only
    assert not out.row_ids.flags.writeable and writable.flags.writeable


@pytest.mark.parametrize("compress", [None, "zstd"])
def test_row_ids_of_a_saved_output_are_read_only(flights_sample, broken_path, tmp_path, compress):
    """The same for an output read back (``fp.open_output``), compressed or plain, one
    shard or several (``whole()`` stacks them)."""
    fitted = order_pipeline().fit(flights_sample)
    fitted.transform(broken_path).save(tmp_path / "one", compress=compress)
    fitted.write_shards(flights_sample, tmp_path / "many", rows_per_partition=5000,
                        compress=compress)  # fmt: skip
    one, many = fp.open_output(tmp_path / "one"), fp.open_output(tmp_path / "many")
    assert len(many) > 1
    for ids in (one.row_ids, one.whole().row_ids, many.shards[1].row_ids, many.whole().row_ids):
        assert not ids.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            ids[0] = 99
    assert (many.whole().row_ids == np.concatenate([s.row_ids for s in many])).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_order_kept(broken_frame, flights_sample, backend):
    """README: ``out.row_ids`` is the source position of each row of X (input order kept);
    quarantined rows leave gaps, never a reordering."""
    pipeline = order_pipeline()
    fitted = pipeline.fit(flights_sample, backend=backend)
    for source in (broken_frame, flights_sample.iloc[::-1].reset_index(drop=True)):
        out = fitted.transform(source, backend=backend)
        ids = out.row_ids
        assert len(ids) == out.X.shape[0] and (np.diff(ids) > 0).all()
        expected = source["distance"].to_numpy(dtype=np.float64)[ids].astype(np.float32)
        np.testing.assert_array_equal(out.X[:, 0], expected)
        np.testing.assert_array_equal(out.y, source["arr_delay"].to_numpy()[ids].astype(np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_x_never_holds_nan_or_inf(backend):
    """README: a feature value that is still missing or infinite after all its steps puts
    the row in quarantine with ``feature <name>: missing or not finite`` — X never holds
    NaN or inf (docs/validation.md: x/0, log of a negative, beyond float32)."""
    frame = pd.DataFrame({
        "a": [1.0, -1.0, 2.0, np.nan, 3.0, 4.0, -2.0, 5.0],
        "b": [1.0, 2.0, 0.0, 1.0, 1.0, 1e10, 1.0, 2.0],
    })  # fmt: skip
    schema = fp.Schema({"a": fp.Float(nullable=True), "b": fp.Float()})
    pipeline = fp.Pipeline(
        schema=schema,
        features=[
            fp.expr("ratio = a / b"),  # b == 0 -> inf
            fp.col("a") >> fp.Log1p(),  # a == -1 -> -inf, a < -1 -> undefined, NaN stays
            fp.expr("big = b * 1e30"),  # finite in float64, beyond float32
        ],
    )
    out = pipeline.fit(frame.iloc[[0, 4, 7]], backend=backend).transform(frame, backend=backend)
    assert np.isfinite(out.X).all()
    assert out.row_ids.tolist() == [0, 4, 7]
    reasons = dict(zip(out.quarantine["row_id"], out.quarantine["reason"]))
    assert sorted(reasons) == [1, 2, 3, 5, 6]
    assert all("feature " in r and "not finite" in r for r in reasons.values()), reasons
    assert out.report.rows_in == out.report.rows_out + out.report.rows_quarantined == 8


def test_rows_in_equals_rows_out_plus_quarantined_in_every_kind_of_run(
    flights_pipeline, flights_sample, tmp_path
):
    """README: ``rows_in == rows_out + rows_quarantined`` always — for a whole transform, a
    streamed pass (``stream.stats``) and shards written partition by partition."""
    fitted = flights_pipeline.fit(flights_sample)
    whole = fitted.transform(flights_sample).report
    assert whole.rows_in == whole.rows_out + whole.rows_quarantined == 20_000
    stream = fitted.batches(flights_sample, batch_size=1000, rows_per_partition=3_000,
                            drop_last=True)  # fmt: skip
    yielded = sum(len(X_batch.indptr) - 1 for X_batch, _ in stream)
    stats = stream.stats
    assert stats.rows_in == stats.rows_out + stats.rows_quarantined == 20_000
    assert stats.rows_out == yielded + stats.rows_dropped
    assert stats.rows_quarantined == whole.rows_quarantined
    assert sum(len(q) for q in stats.quarantine) == whole.rows_quarantined
    shards = fitted.write_shards(flights_sample, tmp_path / "s", rows_per_partition=7_000)
    assert shards.rows_in == shards.rows_out + shards.rows_quarantined == 20_000
    assert fp.open_output(tmp_path / "s").n_rows == whole.rows_out


class _Payload:
    """Unpickling this runs ``os.mkdir(path)``: the proof that a pickle was loaded."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def test_load_never_unpickles(flights_pipeline, flights_sample, tmp_path):
    """README: ``fp.load(path)`` verifies both and never unpickles. A state whose arrays
    hold a pickle (checksums made consistent, as an attacker would) is a
    ``StateFormatError``, and the pickle's code never runs."""
    path = tmp_path / "p.fastprep"
    flights_pipeline.fit(flights_sample.head(2_000)).save(path)
    marker = tmp_path / "pickle-ran"
    buffer = io.BytesIO()
    np.savez(buffer, evil=np.array([_Payload(str(marker))], dtype=object))
    arrays = buffer.getvalue()
    with zipfile.ZipFile(path) as archive:
        envelope = json.loads(archive.read("state.json"))
    envelope["arrays_sha256"] = hashlib.sha256(arrays).hexdigest()
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("state.json", json.dumps(envelope))
        archive.writestr("arrays.npz", arrays)
    with pytest.raises(fp.StateFormatError, match="arrays"):
        fp.load(path)
    assert not marker.exists()


def test_definition_errors_come_before_reading(tmp_path):
    """README: definition errors (``fp.PipelineDefinitionError``, a ``ValueError``) are
    raised when the pipeline is built, before data is read: a typo is reported even when
    the source does not exist."""
    (tmp_path / "typo.py").write_text(
        textwrap.dedent("""
        import fastprep as fp
        pipeline = fp.Pipeline(schema=fp.Schema({'distance': fp.Float()}),
                               features=[fp.col('distnce')], sample='nowhere.parquet')
    """)
    )
    result = subprocess.run(
        [sys.executable, "-m", "fastprep", "run", str(tmp_path / "typo.py"), "--input",
         str(tmp_path / "absent.parquet"), "--output", str(tmp_path / "o")],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert "'distnce'" in result.stderr and "absent.parquet" not in result.stderr
    assert not (tmp_path / "o").exists()
    with pytest.raises(ValueError, match="distnce"):
        fp.Pipeline(schema=fp.Schema({"distance": fp.Float()}), features=[fp.col("distnce")])


@pytest.mark.parametrize("policy", ["quarantine", "raise", "warn", "repair"])
def test_missing_declared_column_is_a_schema_error_whatever_the_policy(flights_sample, policy):
    """README: a declared column missing from the source ... is a ``fp.SchemaError``
    regardless of policy."""
    schema = fp.Schema({"distance": fp.Float(), "wind": fp.Float(on_invalid=policy)})
    pipeline = fp.Pipeline(schema=schema, features=[fp.cols("distance", "wind")])
    with pytest.raises(fp.SchemaError, match="wind"):
        pipeline.fit(flights_sample.head(100))


def test_statistics_are_learned_by_fit_only(flights_pipeline, flights_sample):
    """README: statistics are learned by ``fit`` only and reused unchanged by
    ``transform``: transforming other data changes neither the fitted state nor what the
    same rows give."""
    first, second = flights_sample.iloc[:10_000], flights_sample.iloc[10_000:].copy()
    fitted = flights_pipeline.fit(first)
    before = copy.deepcopy(fitted.params)
    reference = fitted.transform(first)
    second["dep_delay"] *= 3  # very different data
    fitted.transform(second)
    assert fitted.params == before
    again = fitted.transform(first)
    assert (again.X != reference.X).nnz == 0


def test_to_torch_without_torch_names_the_cpu_index(flights_pipeline, flights_sample, monkeypatch):
    """README: on a CPU machine install the CPU build first:
    ``pip install torch --index-url https://download.pytorch.org/whl/cpu``."""
    out = flights_pipeline.fit_transform(flights_sample.head(500))
    monkeypatch.setitem(sys.modules, "torch", None)  # ``import torch`` fails
    with pytest.raises(ImportError, match=r"download\.pytorch\.org/whl/cpu.*fastprep\[torch\]"):
        out.to_torch()


def test_torch_tests_skip_cleanly_where_torch_is_absent(tmp_path):
    """README: where torch is absent the torch tests are skipped (not errors)."""
    runner = tmp_path / "no_torch.py"
    runner.write_text(
        textwrap.dedent("""
        import sys

        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)

        sys.meta_path.insert(0, NoTorch())
        import pytest
        sys.exit(pytest.main(sys.argv[1:]))
    """)
    )
    result = subprocess.run(
        [sys.executable, str(runner), "tests/integrations/test_torch.py", "-q", "-rs",
         "-p", "no:cacheprovider", "-p", "no:xdist"],  # xdist workers lack the NoTorch hook
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    # 5: "no tests collected" when this module is all pytest runs; 0 inside a larger run
    assert result.returncode in (0, 5), result.stdout + result.stderr
    assert "error" not in result.stdout.lower() and "Traceback" not in result.stderr
    assert "1 skipped" in result.stdout and "could not import 'torch'" in result.stdout
