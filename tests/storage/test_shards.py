"""``.npy`` shards: written per partition or from one output, mapped back by ``fp.open_output``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

import fastprep as fp
from fastprep.emit.precision import bfloat16_bits_to_float32


def test_dense_output_maps_back_without_reading_it(dense_pipeline, flights_sample, tmp_path):
    out = dense_pipeline.fit_transform(flights_sample)
    out.save_shards(tmp_path / "o")
    opened = fp.open_output(tmp_path / "o")
    assert isinstance(opened.X, np.memmap) and opened.X.flags.c_contiguous
    assert not opened.X.flags.writeable
    np.testing.assert_array_equal(opened.X, out.X)
    np.testing.assert_array_equal(opened.y, out.y)
    np.testing.assert_array_equal(opened.row_ids, out.row_ids)
    assert opened.feature_names == list(out.feature_names)
    assert opened.report["rows_out"] == out.report.rows_out == opened.n_rows


def test_csr_output_maps_back_over_mapped_arrays(flights_pipeline, flights_sample, tmp_path):
    out = flights_pipeline.fit_transform(flights_sample)
    out.save_shards(tmp_path / "o")
    opened = fp.open_output(tmp_path / "o")
    X = opened.X
    assert sp.issparse(X) and X.format == "csr"
    for part in ("data", "indices", "indptr"):
        assert isinstance(getattr(X, part), np.memmap)  # scipy copied nothing
        np.testing.assert_array_equal(getattr(X, part), getattr(out.X, part))
    v = np.arange(X.shape[1], dtype=np.float32) % 7
    np.testing.assert_allclose(X @ v, out.X @ v, rtol=1e-6)
    assert len(opened.feature_names) == X.shape[1]


def test_write_shards_streams_partitions_and_keeps_narrow_types(dense_pipeline, flights_sample,
                                                                tmp_path):  # fmt: skip
    fitted = dense_pipeline.fit(flights_sample)
    full = fitted.transform(flights_sample, out_dtype="bfloat16")
    stats = fitted.write_shards(flights_sample, tmp_path / "s", rows_per_partition=6000,
                                out_dtype="bfloat16")  # fmt: skip
    assert stats.partitions == 4 and stats.rows_out == full.report.rows_out
    opened = fp.open_output(tmp_path / "s")
    assert len(opened) == 4 and opened.out_dtype == "bfloat16"
    X = np.concatenate([s.X for s in opened])
    assert X.dtype == np.uint16
    np.testing.assert_array_equal(X, full.X)
    np.testing.assert_array_equal(np.concatenate([s.row_ids for s in opened]), full.row_ids)
    assert np.isfinite(bfloat16_bits_to_float32(X)).all()
    with pytest.raises(ValueError, match="4 shards"):
        _ = opened.X
    np.testing.assert_array_equal(opened.whole().X, full.X)
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["rows"] == full.report.rows_out
    assert opened.report["batches"]["rows_quarantined"] == full.report.rows_quarantined
    assert len(opened.quarantine) == full.report.rows_quarantined


def test_folders_from_save_open_too(dense_pipeline, flights_pipeline, flights_sample, tmp_path):
    dense = dense_pipeline.fit_transform(flights_sample)
    dense.save(tmp_path / "d")
    opened = fp.open_output(tmp_path / "d")
    assert isinstance(opened.X, np.memmap) and not opened.notes
    np.testing.assert_array_equal(opened.X, dense.X)
    sparse = flights_pipeline.fit_transform(flights_sample)
    sparse.save(tmp_path / "c")
    opened = fp.open_output(tmp_path / "c")
    assert (opened.X != sparse.X).nnz == 0 and isinstance(opened.X.data, np.memmap)


def test_a_broken_shard_folder_is_a_clear_error(dense_pipeline, flights_sample, tmp_path):
    out = dense_pipeline.fit_transform(flights_sample.head(300))
    out.save_shards(tmp_path / "o")
    next((tmp_path / "o").glob("part-00000.*.X.npy")).unlink()
    with pytest.raises(fp.StateFormatError, match="incomplete output"):
        fp.open_output(tmp_path / "o")
    with pytest.raises(fp.SourceError, match="no such output folder"):
        fp.open_output(tmp_path / "missing")
