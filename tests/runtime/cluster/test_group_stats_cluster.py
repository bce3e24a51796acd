"""``fp.GroupStats`` fitted on a real Dask cluster (2 workers, 4 partitions) learns the
single-process state: the same levels and groups, exact counts, extremes and medians
(each group's values gathered in partition order), and mean and std bit for bit (the
groups' exact sums add up as integers); X transformed on the cluster equals the
single-process X."""

from __future__ import annotations

import numpy as np
import pytest

import fastprep as fp

STATS = ("mean", "std", "count", "min", "max", "median")


def _pipeline() -> fp.Pipeline:
    schema = fp.Schema(
        {
            "carrier": fp.Category(),
            "origin": fp.Category(["EWR", "JFK", "LGA"]),
            "tailnum": fp.String(nullable=True),
            "month": fp.Int(),
            "dep_delay": fp.Float(nullable=True),
            "arr_delay": fp.Float(nullable=True),
        }
    )
    return fp.Pipeline(
        schema,
        [
            fp.cols("carrier", "origin") >> fp.GroupStats("dep_delay", stats=STATS)
            >> fp.FillMissing(0),
            fp.cols("tailnum", "month") >> fp.GroupStats("arr_delay", stats=STATS)
            >> fp.FillMissing("median") >> fp.Standardize(),
        ],
    )  # fmt: skip


def _same_params(a, b) -> None:
    for fa, fb in zip(a, b, strict=True):
        assert fa.keys() == fb.keys()
        for name in fa:
            for pa, pb in zip(fa[name], fb[name], strict=True):
                assert pa.keys() == pb.keys(), name
                for key, value in pa.items():
                    if key == "levels":
                        for la, lb in zip(value, pb[key], strict=True):
                            np.testing.assert_array_equal(np.asarray(la), np.asarray(lb))
                    elif isinstance(value, np.ndarray) and (
                        value.dtype == np.int64 or "stat" in pa  # GroupStats: exact
                    ):
                        np.testing.assert_array_equal(value, pb[key])
                    elif isinstance(value, np.ndarray):
                        np.testing.assert_allclose(
                            value, pb[key], rtol=1e-12, atol=1e-12, equal_nan=True
                        )
                    elif isinstance(value, float):
                        assert abs(value - pb[key]) <= 1e-12 * max(1.0, abs(value)), (name, key)
                    else:
                        assert value == pb[key], (name, key)


@pytest.mark.parametrize("backend", ["pandas", "numba"])
def test_cluster_fit_equals_single_process(flights_row_groups, client, backend) -> None:
    pipeline = _pipeline()
    single = pipeline.fit(flights_row_groups, backend="pandas")
    dist = pipeline.fit(
        flights_row_groups, client=client, rows_per_partition=5_000, backend=backend
    )
    _same_params(single.params, dist.params)
    x_single = single.transform(flights_row_groups).X
    x_dist = dist.transform(flights_row_groups, client=client, rows_per_partition=5_000).X
    np.testing.assert_allclose(x_dist, x_single, rtol=1e-6, atol=1e-6)


def test_a_median_gather_above_the_cap_is_refused_naming_the_step(
    flights_row_groups, client, monkeypatch
) -> None:
    from fastprep.runtime import aggregates as agg

    monkeypatch.setattr(agg, "MAX_GATHERED_VALUES", 1_000)
    with pytest.raises(fp.FitError, match=r"GroupStats\('dep_delay'.*without client="):
        _pipeline().fit(flights_row_groups, client=client, rows_per_partition=5_000)
