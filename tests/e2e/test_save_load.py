"""``fitted.save`` / ``fp.load``: a zip of JSON + npz, never pickle; tampering is detected."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import numpy as np
import pandas as pd
import pytest
from support import assert_same_matrix

import fastprep as fp


@pytest.fixture
def saved(flights_pipeline, flights_sample, tmp_path):
    fitted = flights_pipeline.fit(flights_sample)
    path = tmp_path / "flights.fastprep"
    fitted.save(path)
    return fitted, path


def assert_same_output(a, b) -> None:
    assert_same_matrix(a.X, b.X)
    assert np.array_equal(a.y, b.y)
    assert a.feature_names == b.feature_names
    assert np.array_equal(a.row_ids, b.row_ids)
    assert a.quarantine["row_id"].tolist() == b.quarantine["row_id"].tolist()
    assert a.quarantine["reason"].tolist() == b.quarantine["reason"].tolist()


def test_save_load_transform_is_identical(saved, flights_sample, broken_path):
    fitted, path = saved
    loaded = fp.load(path)
    assert isinstance(loaded, fp.FittedPipeline)
    assert_same_output(fitted.transform(flights_sample), loaded.transform(flights_sample))
    assert_same_output(fitted.transform(broken_path), loaded.transform(broken_path))
    assert loaded.pipeline.name == "flights"
    assert loaded.pipeline.sample == fitted.pipeline.sample
    assert loaded.params == fitted.params


def test_load_accepts_str_and_save_again_is_identical(saved, flights_sample, tmp_path):
    fitted, path = saved
    loaded = fp.load(str(path))
    again = tmp_path / "again.fastprep"
    loaded.save(again)
    assert_same_output(fp.load(again).transform(flights_sample), fitted.transform(flights_sample))


def test_dense_pipeline_with_every_step_round_trips(flights_sample, tmp_path):
    schema = fp.Schema(
        {
            "dep_delay": fp.Float(nullable=True, min=-120),
            "air_time": fp.Float(nullable=True),
            "distance": fp.Float(),
            "hour": fp.Int(min=0, max=24),
            "origin": fp.Category(["EWR", "JFK", "LGA"]),
            "carrier": fp.Category(nullable=True),
            "tailnum": fp.String(nullable=True, max_length=8),
        }
    )
    pipeline = fp.Pipeline(
        schema,
        [
            fp.col("dep_delay")
            >> fp.FillMissing("mean")
            >> fp.Clip(lower=-30)
            >> fp.Standardize(with_std=False),
            fp.col("air_time")
            >> fp.FillMissing(1.5)
            >> fp.Log1p()
            >> fp.MinMax(feature_range=(-1, 1)),
            fp.expr("`fast flight` = where(isnull(air_time), 0, distance / air_time > 7.5)"),
            fp.col("hour") >> fp.OneHot(),
            fp.cols("origin", "carrier") >> fp.OneHot(sparse=False),
            fp.expr("jfk = (origin == 'JFK') & ~(hour < 12)") >> fp.FillMissing(0),
            fp.cols("tailnum", "distance") >> fp.Hash(n_features=32, alternate_sign=False),
        ],
        name="everything",
    )
    fitted = pipeline.fit(flights_sample)
    path = tmp_path / "everything.fastprep"
    fitted.save(path)
    loaded = fp.load(path)
    assert_same_output(fitted.transform(flights_sample), loaded.transform(flights_sample))
    assert loaded.pipeline.plan.to_dict() == fitted.pipeline.plan.to_dict()
    assert loaded.schema.to_dict() == fitted.schema.to_dict()


def test_state_file_is_a_zip_of_json_and_npz_without_pickle(saved):
    _, path = saved
    assert zipfile.is_zipfile(path)
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        assert names == {"state.json", "arrays.npz"}
        document = json.loads(archive.read("state.json"))
        arrays = archive.read("arrays.npz")
        contents = {name: archive.read(name) for name in names}
    assert document["format"] == "fastprep-state"
    assert isinstance(document["version"], int)
    assert {"schema", "plan", "params"} <= set(document["body"])
    with np.load(io.BytesIO(arrays), allow_pickle=False) as npz:
        for key in npz.files:
            assert npz[key].dtype != object
    for name, data in contents.items():
        assert b"pickle" not in data.lower(), name
        # no pickle stream anywhere: protocol 2+ pickles start with 0x80 <protocol>
        for protocol in range(2, 6):
            assert bytes([0x80, protocol, 0x95]) not in data, name
        assert not name.endswith((".pkl", ".pickle"))


def _rewrite(path, transform_envelope=None, *, fix_checksum=False, raw=None):
    with zipfile.ZipFile(path) as archive:
        state = archive.read("state.json")
        arrays = archive.read("arrays.npz")
    envelope = json.loads(state) if raw is None else None
    if transform_envelope is not None:
        transform_envelope(envelope)
    if fix_checksum:
        body = json.dumps(envelope["body"], sort_keys=True, allow_nan=False)
        envelope["body_sha256"] = hashlib.sha256(body.encode()).hexdigest()
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("state.json", raw if raw is not None else json.dumps(envelope))
        archive.writestr("arrays.npz", arrays)


def _dicts(node):
    """Every dict inside a JSON document, depth first (independent of the exact layout)."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _dicts(value)
    elif isinstance(node, list):
        for value in node:
            yield from _dicts(value)


def _first(node, predicate):
    found = next((d for d in _dicts(node) if predicate(d)), None)
    assert found is not None, "the state does not hold what the test tampers with"
    return found


def _first_mean(envelope):
    return _first(envelope["body"]["params"], lambda d: "mean" in d)


def test_modified_statistic_is_detected(saved):
    _, path = saved
    _rewrite(path, lambda env: _first_mean(env).update(mean=_first_mean(env)["mean"] + 1))
    with pytest.raises(fp.StateFormatError, match="checksum"):
        fp.load(path)


def test_modified_plan_is_detected(saved):
    _, path = saved

    def change(envelope):
        _first(envelope["body"]["plan"], lambda d: d.get("op") == "Clip")["upper"] = 6000.0

    _rewrite(path, change)
    with pytest.raises(fp.StateFormatError):
        fp.load(path)


def test_truncated_file_is_detected(saved):
    _, path = saved
    data = path.read_bytes()
    for size in (0, 10, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:size])
        with pytest.raises(fp.StateFormatError):
            fp.load(path)


def test_flipped_byte_in_arrays_is_detected(saved):
    _, path = saved
    with zipfile.ZipFile(path) as archive:
        state = archive.read("state.json")
        arrays = bytearray(archive.read("arrays.npz"))
    arrays[len(arrays) // 2] ^= 0xFF
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("state.json", state)
        archive.writestr("arrays.npz", bytes(arrays))
    with pytest.raises(fp.StateFormatError, match="checksum"):
        fp.load(path)


@pytest.mark.parametrize(
    "content",
    [b"", b"not a zip", b"PK\x03\x04garbage", json.dumps({"format": "x"}).encode()],
)
def test_garbage_file(tmp_path, content):
    path = tmp_path / "junk.fastprep"
    path.write_bytes(content)
    with pytest.raises(fp.StateFormatError):
        fp.load(path)


def test_missing_file_and_missing_member(saved, tmp_path):
    with pytest.raises(fp.StateFormatError):
        fp.load(tmp_path / "nope.fastprep")
    _, path = saved
    with zipfile.ZipFile(path) as archive:
        state = archive.read("state.json")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("state.json", state)
    with pytest.raises(fp.StateFormatError):
        fp.load(path)


def test_not_json_and_wrong_format(saved):
    _, path = saved
    _rewrite(path, raw="{not json")
    with pytest.raises(fp.StateFormatError):
        fp.load(path)
    _rewrite(path, raw=json.dumps({"format": "pickle", "version": 1}))
    with pytest.raises(fp.StateFormatError):
        fp.load(path)


def test_newer_format_version(saved):
    _, path = saved
    _rewrite(path, lambda env: env.update(version=env["version"] + 1))
    with pytest.raises(fp.StateFormatError, match="version"):
        fp.load(path)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda body: _first(body["plan"], lambda d: "steps" in d)["steps"].append(
            {"op": "Eval", "code": "1"}
        ),
        lambda body: _first(body["plan"], lambda d: d.get("op") == "div").update(
            op="__import__", args=[{"const": "os"}]
        ),
        lambda body: _first(body["plan"], lambda d: d.get("op") == "div")["args"].append(
            {"const": [1, 2]}
        ),
        lambda body: _first(body["schema"], lambda d: d.get("type") == "Float").update(
            type="Pickle"
        ),
        lambda body: body["params"].pop(),
        lambda body: body.pop("plan"),
    ],
)
def test_consistent_checksum_but_malformed_content(saved, tamper):
    # someone rewrote the body and its checksum: still refused, with a StateFormatError
    _, path = saved
    _rewrite(path, lambda env: tamper(env["body"]), fix_checksum=True)
    with pytest.raises(fp.StateFormatError):
        fp.load(path)


def test_consistent_checksum_but_malformed_statistics(saved, flights_sample):
    # a fitted mean that is not a number must be refused as a bad state file, not crash
    # numpy later with an unrelated TypeError
    _, path = saved
    _rewrite(path, lambda env: _first_mean(env).update(mean="abc"), fix_checksum=True)
    with pytest.raises(fp.StateFormatError):
        fp.load(path).transform(flights_sample)


def test_save_overwrites_and_leaves_no_temporary_file(saved, flights_sample):
    fitted, path = saved
    path.write_bytes(b"old content")
    fitted.save(path)
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert fp.load(path).params == fitted.params


def test_infinite_categories_round_trip(tmp_path):
    # Float(allow_inf=True) keeps ±inf as values; a OneHot of it has ±inf categories, which
    # must survive save/load (JSON has no inf literal, so they need an explicit encoding)
    frame = pd.DataFrame({"a": [1.0, np.inf, 2.0, -np.inf, 1.0]})
    schema = fp.Schema({"a": fp.Float(allow_inf=True)})
    fitted = fp.Pipeline(schema, [fp.col("a") >> fp.OneHot()]).fit(frame)
    expected = fitted.transform(frame)
    assert expected.X.shape == (5, 4)
    path = tmp_path / "inf.fastprep"
    fitted.save(path)
    assert_same_output(fp.load(path).transform(frame), expected)
