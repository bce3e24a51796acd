"""The quantile/power steps fitted on a real Dask cluster equal the single-process fit:
each partition sends its present values, merged in partition order (exact quantiles)."""

from __future__ import annotations

import numpy as np
import pytest

import fastprep as fp
from fastprep.distributed import aggregates as agg


def _pipeline() -> fp.Pipeline:
    schema = fp.Schema(
        {
            "dep_delay": fp.Float(nullable=True),
            "air_time": fp.Float(nullable=True),
            "distance": fp.Float(),
        }
    )
    return fp.Pipeline(
        schema=schema,
        features=[
            fp.col("dep_delay") >> fp.RobustScale() >> fp.FillMissing(0),
            fp.col("air_time") >> fp.FillMissing("median") >> fp.QuantileTransform(300)
            >> fp.PowerTransform(),
            fp.col("distance") >> fp.MaxAbsScale() >> fp.Bin(7) >> fp.Standardize(),
            fp.expr("d2 = distance") >> fp.Bin(4, strategy="uniform", encode="onehot"),
            fp.expr("d3 = dep_delay") >> fp.Bin(edges=[-10, 0, 10]) >> fp.FillMissing(-1),
        ],
    )  # fmt: skip


def _same(a, b) -> None:
    if isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-12, abs=1e-15)
    else:
        assert a == b


def test_cluster_fit_equals_single_process(flights_row_groups, client) -> None:
    pipeline = _pipeline()
    single = pipeline.fit(flights_row_groups)
    dist = pipeline.fit(flights_row_groups, client=client, rows_per_partition=5_000)
    for a, b in zip(single.params, dist.params, strict=True):
        for name in a:
            for sa, sb in zip(a[name], b[name], strict=True):
                assert sa.keys() == sb.keys(), name
                for key in sa:
                    _same(sa[key], sb[key])
    x_single = single.transform(flights_row_groups).X
    x_dist = dist.transform(flights_row_groups, client=client, rows_per_partition=5_000).X
    np.testing.assert_array_equal(x_single.toarray(), x_dist.toarray())


def test_a_gather_above_the_cap_is_refused_naming_the_step(
    flights_row_groups, client, monkeypatch
) -> None:
    monkeypatch.setattr(agg, "MAX_GATHERED_VALUES", 1_000)
    with pytest.raises(fp.FitError, match=r"RobustScale\(.*'dep_delay'.*without client="):
        _pipeline().fit(flights_row_groups, client=client, rows_per_partition=5_000)
