"""``fastprep run`` on a pipeline file with tag features writes the X of ``fit_transform``,
and ``fastprep explain`` shows the ``Tags`` feature."""

from __future__ import annotations

import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from support import assert_same_matrix

import fastprep as fp
from fastprep.cli import main
from fastprep.runtime.execute import Output

PIPELINE = """
import fastprep as fp

pipeline = fp.Pipeline(
    schema=fp.Schema({
        "route_carriers": fp.String(nullable=True),
        "route_list": fp.ListOf(nullable=True),
        "distance": fp.Float(),
    }),
    features=[
        fp.Tags("route_carriers", sep="|") >> fp.OneHot(),
        fp.cols("route_list") >> fp.Hash(2**12),
        fp.col("distance") >> fp.Standardize(),
    ],
)
"""


@pytest.fixture(scope="module")
def tagged_file(tmp_path_factory, _flights_sample_cached):
    frame = _flights_sample_cached
    route = frame.groupby(["origin", "dest"])["carrier"].agg(lambda s: "|".join(sorted(set(s))))
    text = frame.join(route.rename("t"), on=["origin", "dest"])["t"].to_numpy(
        dtype=object, copy=True
    )
    text[::41] = None
    folder = tmp_path_factory.mktemp("tags_cli")
    table = pa.table(
        {
            "route_carriers": pa.array(list(text), pa.string()),
            "route_list": pa.array(
                [None if t is None else t.split("|") for t in text], pa.list_(pa.string())
            ),
            "distance": pa.array(frame.distance.astype(float)),
        }
    )
    pq.write_table(table, folder / "tags.parquet")
    (folder / "tags_pipeline.py").write_text(textwrap.dedent(PIPELINE))
    return folder


@pytest.mark.parametrize("backend", ["pandas", "numba"])
def test_run_writes_the_fit_transform_output(tagged_file, backend, capsys) -> None:
    from fastprep.cli import load_pipeline_file

    source = tagged_file / "tags.parquet"
    out = tagged_file / f"out_{backend}"
    code = main(["run", str(tagged_file / "tags_pipeline.py"), "--input", str(source),
                 "--output", str(out), "--backend", backend])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    opened = fp.open_output(out)
    expected = load_pipeline_file(tagged_file / "tags_pipeline.py").fit_transform(source)
    assert isinstance(expected, Output)
    assert_same_matrix(sp.csr_matrix(opened.X), expected.X)
    assert list(opened.feature_names) == list(expected.feature_names)
    assert main(["explain", str(tagged_file / "tags_pipeline.py")]) == 0
    assert "Tags(route_carriers, sep='|') >> OneHot()" in capsys.readouterr().out
