"""What a cluster fit leaves on the workers for the transform after it (the scattered job
with its lookup tables, the validated partitions it kept) is validated by the fit's
schema. A transform of another pipeline with the same plan and fitted parameters but a
schema that validates differently (a bound) must validate the rows by its own schema: the
keys of both include the schema."""

from __future__ import annotations

import pytest

distributed = pytest.importorskip("distributed")

from support import REPO, assert_same_matrix  # noqa: E402

import fastprep as fp  # noqa: E402

SAMPLES = REPO / "data_samples"


def _with_planes(delay: fp.Float) -> fp.Pipeline:
    schema = fp.Schema({"tailnum": fp.String(nullable=True), "dep_delay": delay})
    planes = fp.Schema({"tailnum": fp.String(), "seats": fp.Int()})
    lookup = fp.Lookup(SAMPLES / "planes.parquet", key={"tailnum": "tailnum"}, schema=planes)
    return fp.Pipeline(
        schema,
        [
            fp.col("planes.seats") >> fp.FillMissing("mean"),
            fp.col("dep_delay") >> fp.FillMissing(0),
        ],
        lookups={"planes": lookup},
    )


def _plain(delay: fp.Float) -> fp.Pipeline:
    # parameters that do not depend on the rows kept: the two fits' are equal
    schema = fp.Schema({"dep_delay": delay, "arr_delay": fp.Float(nullable=True)})
    return fp.Pipeline(schema, [fp.cols("dep_delay", "arr_delay") >> fp.FillMissing(0)])


@pytest.mark.parametrize("make", [_with_planes, _plain], ids=["scattered job", "kept partitions"])
def test_a_transform_validates_by_its_own_schema_after_another_pipelines_fit(make) -> None:
    source = str(SAMPLES / "flights.parquet")
    bounded = make(fp.Float(nullable=True, max=60))  # rows delayed more: quarantined
    fitted = make(fp.Float(nullable=True)).fit(source)
    expected = fitted.transform(source)
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        other = bounded.fit(source, client=client, rows_per_partition=10_000)
        if make is _plain:
            assert other.params == fitted.params  # the same parameters: only the schema differs
        out = fitted.transform(source, client=client, rows_per_partition=10_000)
    assert out.report.rows_quarantined == expected.report.rows_quarantined
    assert_same_matrix(out.X, expected.X)
