"""Expression functions on a real cluster: derived columns (date parts in a zone, text
functions, earlier outputs by name) flow through the distributed fit and transform and give
the single-machine result."""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_same_matrix

import fastprep as fp

ROWS = 5_000
SCHEMA = fp.Schema(
    {
        "time_hour": fp.Datetime(tz="America/New_York"),
        "origin": fp.Category(),
        "dest": fp.Category(),
        "carrier": fp.Category(),
        "tailnum": fp.String(nullable=True),
        "distance": fp.Float(),
        "air_time": fp.Float(nullable=True),
        "dep_delay": fp.Float(nullable=True),
    }
)
FEATURES = [
    fp.expr("local_hour = hour(time_hour)") >> fp.OneHot(),
    fp.expr("weekday = dayofweek(time_hour)") >> fp.Categorify(),
    fp.expr("speed = distance / air_time * 60") >> fp.FillMissing("median") >> fp.Standardize(),
    fp.expr("band = speed // 100") >> fp.FillMissing(-1) >> fp.OneHot(),
    fp.expr("route = lower(origin) + '-' + dest") >> fp.OneHot(min_frequency=20),
    fp.expr("tail = upper(strip(tailnum))") >> fp.FillMissing("UNK") >> fp.Hash(64),
    fp.expr("late = clip(round(dep_delay, -1), -30, 120)") >> fp.FillMissing("mean") >> fp.MinMax(),
    fp.expr("ua = carrier in ('UA', 'AA')"),
]


@pytest.fixture(scope="module")
def pipeline() -> fp.Pipeline:
    return fp.Pipeline(SCHEMA, FEATURES)


def test_distributed_fit_and_transform_equal_single_machine(
    pipeline, flights_row_groups, client
) -> None:
    single = pipeline.fit(flights_row_groups)
    dist = pipeline.fit(flights_row_groups, client=client, rows_per_partition=ROWS)
    for a, b in zip(single.params, dist.params, strict=True):
        assert a.keys() == b.keys()
        for name in a:
            for pa, pb in zip(a[name], b[name], strict=True):
                assert pa.keys() == pb.keys()
                for key, value in pa.items():
                    if isinstance(value, float):
                        assert value == pytest.approx(pb[key], rel=1e-9, abs=1e-12), (name, key)
                    else:
                        assert value == pb[key], (name, key)
    out = dist.transform(flights_row_groups, client=client, rows_per_partition=ROWS)
    expected = single.transform(flights_row_groups)
    assert list(out.feature_names) == list(expected.feature_names)
    assert np.array_equal(out.row_ids, expected.row_ids)
    assert_same_matrix(out.X, dist.transform(flights_row_groups).X)
    assert abs(out.X - expected.X).max() <= 1e-6
