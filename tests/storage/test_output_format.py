"""One output format: every producer writes it, ``fp.open_output`` reads it, anything else is
a clear ``StateFormatError``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from support import assert_same_matrix

import fastprep as fp
from fastprep.cli import main
from fastprep.storage import output_format as fmt
from fastprep.storage.shards import OpenedOutput, ShardWriter

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipelines" / "flights.py"
SAMPLE = REPO / "data_samples" / "flights.parquet"
BROKEN = REPO / "data_samples" / "flights_broken.csv"


def assert_same_output(opened: OpenedOutput, out) -> None:
    """The opened folder holds exactly ``out`` (X bit-equal, y, row ids, names, rows)."""
    X = opened.whole().X
    if sp.issparse(out.X):
        assert sp.issparse(X)
        for part in ("data", "indices", "indptr"):
            assert np.array_equal(getattr(X, part), getattr(out.X, part))
    else:
        assert np.array_equal(X, out.X) and X.dtype == out.X.dtype
    assert np.array_equal(opened.whole().y, out.y)
    assert np.array_equal(opened.whole().row_ids, out.row_ids)
    assert opened.feature_names == out.feature_names
    assert opened.report["rows_out"] == out.report.rows_out == opened.n_rows
    assert opened.quarantine["row_id"].tolist() == out.quarantine["row_id"].tolist()


def only_published_files(folder: Path) -> set[str]:
    """What is in the folder besides the manifest's files and the pipeline alias."""
    doc = json.loads((folder / "manifest.json").read_text())
    present = {p.name for p in folder.iterdir()}
    return present - fmt.named_files(doc) - {"manifest.json", "pipeline.fastprep", *fmt.LOCK_FILES}


@pytest.mark.parametrize("compress", [None, "zstd", "lz4"])
def test_save_csr_and_dense_round_trip(flights_pipeline, dense_pipeline, flights_sample,
                                       tmp_path, compress):  # fmt: skip
    sparse = flights_pipeline.fit_transform(flights_sample)
    sparse.save(tmp_path / "c", compress=compress)
    opened = fp.open_output(tmp_path / "c")
    assert_same_output(opened, sparse)
    assert opened.codec == compress and opened.out_dtype == "float32"
    mapped = compress is None
    assert isinstance(opened.X.data, np.memmap) == mapped  # plain .npy: mapped, never read
    dense = dense_pipeline.fit_transform(flights_sample)
    dense.save(tmp_path / "d", compress=compress)
    opened = fp.open_output(tmp_path / "d")
    assert_same_output(opened, dense)
    assert isinstance(opened.X, np.memmap) == mapped
    if compress:
        assert not opened.X.flags.writeable or opened.X.base is None  # a fresh array


def test_compressed_arrays_span_many_chunks(tmp_path, monkeypatch):
    """Arrays larger than a chunk are cut, compressed on threads and put back in order."""
    monkeypatch.setattr(fmt, "CHUNK_BYTES", 4096)
    X = np.random.default_rng(0).standard_normal((3000, 7)).astype(np.float32)
    writer = ShardWriter(tmp_path, [f"c{i}" for i in range(7)], "float32",
                                        compress="zstd")  # fmt: skip
    writer.add(X, None, np.arange(3000))
    writer.close({})
    opened = fp.open_output(tmp_path)
    assert len(opened.manifest["shards"][0]["arrays"]["X"]["chunks"]) == -(-X.nbytes // 4096)
    assert np.array_equal(opened.X, X) and opened.y is None


def test_hashed_names_are_stored_as_a_range(flights_pipeline, flights_sample, tmp_path):
    out = flights_pipeline.fit_transform(flights_sample)
    out.save(tmp_path)
    doc = json.loads((tmp_path / "manifest.json").read_text())
    ranges = [n for n in doc["feature_names"] if isinstance(n, dict)]
    assert ranges == [{"prefix": "hash:tailnum,dest", "n": 262_144}]
    assert (tmp_path / "manifest.json").stat().st_size < 20_000  # not 7.5 MB of names
    names = fp.open_output(tmp_path).feature_names
    assert len(names) == len(out.feature_names) == out.X.shape[1]
    assert names[-1] == "hash:tailnum,dest[262143]" and names[0] == out.feature_names[0]
    assert names == list(out.feature_names)


def test_cli_run_and_transform_folders_open(tmp_path, flights_pipeline, flights_sample, capsys):
    assert main(["run", str(PIPELINE), "--output", str(tmp_path / "r")]) == 0
    opened = fp.open_output(tmp_path / "r")
    # the summary counts each file once: arrays, quarantine, report; the pipeline apart
    data = fmt.named_files(opened.manifest) - {opened.pipeline_path.name}
    wrote = capsys.readouterr().out.splitlines()[-1]
    assert wrote.startswith(f"wrote {tmp_path / 'r'}: manifest.json + {len(data)} files (")
    assert wrote.endswith(", fitted pipeline pipeline.fastprep"), wrote
    fitted = fp.load(tmp_path / "r" / "pipeline.fastprep")
    assert (tmp_path / "r" / "pipeline.fastprep").samefile(opened.pipeline_path)
    assert_same_output(opened, fitted.transform(SAMPLE))
    code = main(["transform", str(tmp_path / "r" / "pipeline.fastprep"), "--input", str(BROKEN),
                 "--output", str(tmp_path / "t"), "--compress", "zstd"])  # fmt: skip
    wrote = capsys.readouterr().out.splitlines()[-1]
    assert code == 0 and "zstd" in wrote
    opened = fp.open_output(tmp_path / "t")
    assert opened.codec == "zstd"
    # what the user got, counted as `run` counts it: not the manifest, the locks or the alias
    data = fmt.named_files(opened.manifest) - {opened.pipeline_path.name}
    assert wrote.startswith(f"wrote {tmp_path / 't'}: manifest.json + {len(data)} files ("), wrote
    assert wrote.endswith(", fitted pipeline pipeline.fastprep"), wrote
    assert_same_output(opened, fitted.transform(BROKEN))


def test_write_shards_folder_opens_with_its_quarantine(flights_pipeline, flights_sample,
                                                      tmp_path):  # fmt: skip
    fitted = flights_pipeline.fit(flights_sample)
    full = fitted.transform(flights_sample)
    fitted.write_shards(flights_sample, tmp_path, rows_per_partition=7000, compress="lz4")
    opened = fp.open_output(tmp_path)
    assert len(opened) == 3 and [s.rows for s in opened] == [
        s["rows"] for s in opened.manifest["shards"]
    ]
    assert_same_output(opened, full)
    assert fp.load(opened.pipeline_path).params == fitted.params


@pytest.mark.slow  # a LocalCluster of processes, fit and transform on it: ~19 s on 2 cores
def test_cluster_run_with_local_scheduler(tmp_path, flights_pipeline, capsys):
    """``fastprep run --scheduler local``: a real LocalCluster writes the same format."""
    pytest.importorskip("distributed")
    started = time.perf_counter()
    code = main(["run", str(PIPELINE), "--output", str(tmp_path), "--scheduler", "local",
                 "--no-progress"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    opened = fp.open_output(tmp_path)
    fitted = fp.load(tmp_path / "pipeline.fastprep")
    expected = fitted.transform(SAMPLE)
    assert_same_output(opened, expected)
    assert opened.manifest["fingerprint"] and opened.report["rows_in"] == 20_000
    # the rows written are the fit's own, as in one process: no drift against themselves
    assert not opened.report.get("drift")
    from fastprep.runtime import cluster as fd

    assert_same_matrix(fd.load_shards(tmp_path).X, expected.X)
    assert only_published_files(tmp_path) == set()
    assert time.perf_counter() - started < 60


def test_overwriting_with_another_shape_leaves_one_output(flights_pipeline, dense_pipeline,
                                                         flights_sample, tmp_path):  # fmt: skip
    fitted = flights_pipeline.fit(flights_sample)
    fitted.write_shards(flights_sample, tmp_path, rows_per_partition=5000)  # 4 CSR shards
    assert len(fp.open_output(tmp_path)) == 4
    (tmp_path / "part-00007.0123456789ab.X.npy").write_bytes(b"a crashed writer's file")
    (tmp_path / "notes.txt").write_text("the user's own file")
    small = dense_pipeline.fit_transform(flights_sample.head(500))
    small.save(tmp_path)  # dense, one shard, no pipeline
    opened = fp.open_output(tmp_path)
    assert len(opened) == 1 and opened.X.shape == small.X.shape
    assert_same_output(opened, small)
    assert only_published_files(tmp_path) == {"notes.txt"}
    assert not (tmp_path / "pipeline.fastprep").exists()  # it described the earlier output
    assert opened.pipeline_path is None


def test_a_failed_write_leaves_the_earlier_output(dense_pipeline, flights_sample, tmp_path):
    first = dense_pipeline.fit_transform(flights_sample.head(300))
    first.save(tmp_path)
    before = sorted(os.listdir(tmp_path))
    second = dense_pipeline.fit_transform(flights_sample.head(400))
    second.quarantine = "not a frame"  # writing it fails half-way through the save
    with pytest.raises(AttributeError):
        second.save(tmp_path)
    assert sorted(os.listdir(tmp_path)) == before  # its own files were removed
    assert_same_output(fp.open_output(tmp_path), first)


def test_unknown_layouts_are_state_format_errors(dense_pipeline, flights_sample, tmp_path):
    cases = {
        "legacy save": ({"X.npz": b"PK", "feature_names.json": b"[]"}, "earlier fastprep"),
        "legacy shards": ({"output.json": b"{}"}, "output.json"),
        "legacy cluster": (
            {"manifest.json": b'{"fingerprint": "x", "partitions": []}', "part-00000.npz": b""},
            "cluster output written by an earlier fastprep",
        ),
        "garbage manifest": ({"manifest.json": b"\x00\x01 not json"}, "not a readable"),
        "other json": ({"manifest.json": b'{"format": "something-else"}'}, "not a fastprep"),
        "newer": (
            {"manifest.json": b'{"format": "fastprep-output", "version": 99}'},
            "upgrade fastprep",
        ),
        "empty": ({}, "not a fastprep output folder"),
        "never published": ({"part-00000.0123456789ab.X.npy": b""}, "never published"),
        # a writer killed right after it claimed the folder, before its first file
        "only claimed": ({".fastprep.writing": b"", ".fastprep.lock": b""}, "never published"),
    }
    for name, (files, message) in cases.items():
        folder = tmp_path / name.replace(" ", "_")
        folder.mkdir()
        for file, data in files.items():
            (folder / file).write_bytes(data)
        with pytest.raises(fp.StateFormatError, match=message):
            fp.open_output(folder)
    with pytest.raises(fp.SourceError, match="no such output folder"):
        fp.open_output(tmp_path / "missing")


def test_truncated_or_malformed_files_are_named(dense_pipeline, flights_sample, tmp_path):
    out = dense_pipeline.fit_transform(flights_sample.head(300))
    out.save(tmp_path)
    x_file = next(tmp_path.glob("part-*.X.npy"))
    data = x_file.read_bytes()
    x_file.write_bytes(data[:-8])
    with pytest.raises(fp.StateFormatError, match=f"corrupt output: {x_file.name}"):
        fp.open_output(tmp_path)
    x_file.write_bytes(data)
    doc = json.loads((tmp_path / "manifest.json").read_text())
    doc["shards"][0]["arrays"]["X"]["shape"] = [7, 7]
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(fp.StateFormatError, match="the manifest says"):
        fp.open_output(tmp_path)
    doc["shards"][0]["arrays"]["X"]["shape"] = out.X.shape
    doc["shards"][0]["arrays"]["X"]["file"] = "../elsewhere.npy"
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(fp.StateFormatError, match="not a file of this folder"):
        fp.open_output(tmp_path)
    del doc["shards"][0]["arrays"]
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(fp.StateFormatError, match="malformed output folder"):
        fp.open_output(tmp_path)


def test_opened_quarantine_and_report_are_read_lazily(flights_pipeline, flights_sample, tmp_path):
    out = flights_pipeline.fit_transform(flights_sample)
    out.save(tmp_path)
    opened = fp.open_output(tmp_path)
    assert opened._report is None and opened.shards[0]._cache.get("quarantine") is None
    assert isinstance(opened.quarantine, pd.DataFrame) and opened.report["rows_in"] == 20_000


def test_a_failure_after_the_publish_keeps_the_new_output(dense_pipeline, flights_sample,
                                                          tmp_path, monkeypatch):  # fmt: skip
    first = dense_pipeline.fit_transform(flights_sample.head(300))
    first.save(tmp_path)
    second = dense_pipeline.fit_transform(flights_sample.head(400))

    def fail(*_: object) -> None:
        raise OSError("disk gone while tidying")

    monkeypatch.setattr(fmt, "remove_unnamed", fail)
    with pytest.raises(OSError, match="tidying"):
        second.save(tmp_path)
    assert_same_output(fp.open_output(tmp_path), second)  # published: not discarded


def test_transform_with_output_dir_in_memory_writes_the_folder(dense_pipeline, flights_sample,
                                                               tmp_path):  # fmt: skip
    fitted = dense_pipeline.fit(flights_sample)
    out = fitted.transform(flights_sample, output_dir=tmp_path, compress="zstd")
    opened = fp.open_output(tmp_path)
    assert opened.codec == "zstd"
    assert_same_output(opened, out)


def test_publishing_leaves_the_users_own_files(dense_pipeline, flights_sample, tmp_path):
    """Files named like an earlier version's (report.json, X.npy, part-00001.json, a
    shard-00000/ folder) but not its layout are never removed by a publish."""
    mine = {"report.json": b"{}", "X.npy": b"mine", "y.npy": b"mine", "row_ids.npy": b"",
            "part-00001.json": b"{}", "part-00002.npy": b"mine", "quarantine.parquet": b"x"}  # fmt: skip
    for name, data in mine.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "shard-00000").mkdir()
    (tmp_path / "shard-00000" / "X.npy").write_bytes(b"mine")
    out = dense_pipeline.fit_transform(flights_sample.head(300))
    for _ in range(2):  # onto the folder without a manifest, then over our own output
        out.save(tmp_path)
        assert_same_output(fp.open_output(tmp_path), out)
        assert {n: (tmp_path / n).read_bytes() for n in mine} == mine
        assert (tmp_path / "shard-00000" / "X.npy").read_bytes() == b"mine"


def test_an_earlier_versions_output_is_replaced(dense_pipeline, flights_sample, tmp_path):
    """What an earlier fastprep wrote (X.npz + feature_names.json ...; output.json +
    shard-NNNNN/; a part-NNNNN.npz cluster manifest) goes when a publish replaces it."""
    out = dense_pipeline.fit_transform(flights_sample.head(300))
    layouts = {
        "save": {"X.npz": b"PK", "feature_names.json": b"[]", "y.npy": b"", "report.json": b"{}"},
        "shards": {"output.json": b"{}", "shard-00000/X.npy": b"", "shard-00000/y.npy": b""},
        "cluster": {"manifest.json": b'{"fingerprint": "x", "partitions": []}',
                    "part-00000.npz": b"", "part-00000.json": b"{}"},
    }  # fmt: skip
    for name, files in layouts.items():
        folder = tmp_path / name
        for file, data in files.items():
            (folder / file).parent.mkdir(parents=True, exist_ok=True)
            (folder / file).write_bytes(data)
        out.save(folder)
        assert_same_output(fp.open_output(folder), out)
        assert only_published_files(folder) == set(), name


def test_the_alias_is_a_fallback_for_the_manifests_pipeline(dense_pipeline, flights_sample,
                                                           tmp_path, monkeypatch, capsys):  # fmt: skip
    """A writer killed between replacing the manifest and re-pointing pipeline.fastprep
    leaves the alias on the previous run's pipeline: fp.load and `fastprep transform` of
    the alias use the pipeline the manifest names."""
    small = fp.Pipeline(fp.Schema({"distance": fp.Float(), "origin": fp.Category()}),
                        [fp.col("distance") >> fp.Standardize()])  # fmt: skip
    fitted_a, a = small.fit_and_transform(flights_sample.head(300))
    a.save(tmp_path / "out", pipeline=fitted_a)
    fitted_b, b = dense_pipeline.fit_and_transform(flights_sample.head(300))
    monkeypatch.setattr(fmt, "_update_alias", lambda *_: None)  # killed right there
    b.save(tmp_path / "out", pipeline=fitted_b)  # the alias was not re-pointed
    monkeypatch.undo()
    alias = tmp_path / "out" / "pipeline.fastprep"
    assert fp.open_output(tmp_path / "out").pipeline_path != alias.resolve()
    assert fp.load(alias).transform(flights_sample.head(50)).feature_names == b.feature_names
    code = main(["transform", str(alias), "--input", str(SAMPLE), "--output",
                 str(tmp_path / "t")])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert fp.open_output(tmp_path / "t").feature_names == b.feature_names


def test_loading_several_shards_copies_once(flights_pipeline, flights_sample, tmp_path,
                                            monkeypatch):  # fmt: skip
    """load_shards of a multi-shard folder returns the concatenation itself (no second
    copy of y and row_ids)."""
    from fastprep.runtime.shards import load_shards

    flights_pipeline.fit(flights_sample).write_shards(flights_sample, tmp_path,
                                                      rows_per_partition=5000)  # fmt: skip
    made = []
    whole = OpenedOutput.whole
    monkeypatch.setattr(OpenedOutput, "whole", lambda self: made.append(whole(self)) or made[-1])
    loaded = load_shards(tmp_path)
    assert len(made) == 1 and len(fp.open_output(tmp_path)) == 4
    assert np.shares_memory(loaded.y, made[0].y)
    assert np.shares_memory(loaded.row_ids, made[0].row_ids)
