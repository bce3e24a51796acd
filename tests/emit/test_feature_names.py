"""``out.feature_names`` behaves like a list of str even though hashed names are lazy."""

from __future__ import annotations

import json

import pytest

from fastprep.emit.names import FeatureNames, HashedNames


def test_lazy_names_behave_like_a_list() -> None:
    names = FeatureNames([["a", "b"], HashedNames("hash:x", 3), [], ["z"]])
    expected = ["a", "b", "hash:x[0]", "hash:x[1]", "hash:x[2]", "z"]
    assert len(names) == 6 and list(names) == expected and names == expected
    assert names[-1] == "z" and names[2] == "hash:x[0]" and names[1:4] == expected[1:4]
    assert names.index("hash:x[1]") == 3 and "z" in names
    assert json.loads(json.dumps(list(names))) == expected
    assert names != expected[:-1] and names != ["a"] * 6
    with pytest.raises(IndexError):
        names[6]
    with pytest.raises(IndexError):
        names[-7]


def test_pipeline_names_one_per_column(flights_pipeline, flights_sample) -> None:
    out = flights_pipeline.fit_transform(flights_sample)
    assert len(out.feature_names) == out.X.shape[1]
    assert out.feature_names[-1] == "hash:tailnum,dest[262143]"
    assert out.feature_names[:5] == ["dep_delay", "distance", "speed", "dep_hour", "origin=EWR"]
