"""Review: the job (plan, schema, backend, lookup tables) a fit leaves scattered on the
cluster for the transform after it is taken by the next transform on that scheduler when
its token matches. The token names the plan, the tables, the backend, the retry policy
and the rows, not the schema's own rules: a transform of another pipeline whose schema
validates differently (a bound) must still validate by its own schema."""

from __future__ import annotations

import pytest

distributed = pytest.importorskip("distributed")

from support import REPO, assert_same_matrix  # noqa: E402

import fastprep as fp  # noqa: E402

SAMPLES = REPO / "data_samples"


def _pipeline(delay: fp.Float) -> fp.Pipeline:
    schema = fp.Schema({"tailnum": fp.String(nullable=True), "dep_delay": delay})
    planes = fp.Schema({"tailnum": fp.String(), "seats": fp.Int()})
    return fp.Pipeline(
        schema,
        [
            fp.col("planes.seats") >> fp.FillMissing("mean"),
            fp.col("dep_delay") >> fp.FillMissing(0),
        ],
        lookups={
            "planes": fp.Lookup(
                SAMPLES / "planes.parquet", key={"tailnum": "tailnum"}, schema=planes
            )
        },
    )


@pytest.mark.xfail(
    strict=True,
    reason="job._shared's token for the scattered job leaves out the schema: another "
    "pipeline's transform takes the fit's job and validates by the fit's schema",
)
def test_a_transform_validates_by_its_own_schema_after_another_pipelines_fit() -> None:
    source = str(SAMPLES / "flights.parquet")
    bounded = _pipeline(fp.Float(nullable=True, max=60))  # rows delayed more: quarantined
    plain = _pipeline(fp.Float(nullable=True))
    fitted = plain.fit(source)
    expected = fitted.transform(source)
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        bounded.fit(source, client=client, rows_per_partition=10_000)
        out = fitted.transform(source, client=client, rows_per_partition=10_000)
    assert out.report.rows_quarantined == expected.report.rows_quarantined
    assert_same_matrix(out.X, expected.X)
