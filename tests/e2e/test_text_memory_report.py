"""The report records, per text column, its bytes before and after dictionary encoding."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

import fastprep as fp

SCHEMA = fp.Schema(
    {
        "origin": fp.Category(["EWR", "JFK", "LGA"]),
        "tailnum": fp.String(nullable=True),
        "dest": fp.String(),
        "distance": fp.Float(min=0),
    }
)
FEATURES = [
    fp.cols("origin", "dest") >> fp.OneHot(),
    fp.col("tailnum") >> fp.Categorify(min_frequency=2),
    fp.col("distance"),
]


def run(source):
    return fp.Pipeline(SCHEMA, FEATURES).fit_transform(source)


def arrow_strings_bytes(values) -> int:
    """Arrow-backed text keeps its distinct values as one Arrow string array: its buffers."""
    distinct = pd.unique(pd.Series(values).dropna().to_numpy(dtype=object))
    return pa.array(list(distinct), type=pa.large_string()).nbytes


def test_arrow_backed_strings_use_buffer_sizes(flights_sample):
    frame = flights_sample[["origin", "tailnum", "dest", "distance"]]
    assert isinstance(frame["tailnum"].dtype, pd.StringDtype)
    out = run(frame)
    encoding = out.report.text_encoding
    assert set(encoding) == {"origin", "tailnum", "dest"}  # numbers are not text
    for name, entry in encoding.items():
        buffers = pa.chunked_array(pa.array(frame[name].array)).nbytes
        assert entry["bytes_before"] == buffers == frame[name].memory_usage(index=False, deep=True)
        assert entry["rows"] == len(frame)
        assert entry["codes_bytes"] == 4 * len(frame)  # int32 codes over every source row
        assert entry["distinct"] == frame[name].nunique()
        assert entry["strings_bytes"] == arrow_strings_bytes(frame[name])
        assert entry["bytes_after"] == entry["codes_bytes"] + entry["strings_bytes"]
    # three airports: the codes are most of it, well under half the Arrow column
    assert encoding["origin"]["bytes_after"] < encoding["origin"]["bytes_before"] / 2


def test_python_object_strings(flights_sample):
    frame = flights_sample[["origin", "tailnum", "dest", "distance"]].astype(
        {"origin": object, "tailnum": object, "dest": object}
    )
    out = run(frame)
    entry = out.report.text_encoding["tailnum"]
    assert entry["source_dtype"] == "object"
    assert entry["bytes_before"] == frame["tailnum"].memory_usage(index=False, deep=True)
    # Python strings are converted to Arrow strings once, then encoded like Arrow text
    assert entry["strings_bytes"] == arrow_strings_bytes(frame["tailnum"])
    dest = out.report.text_encoding["dest"]
    # 20,000 Python string objects vs 101 distinct ones and int32 codes
    assert dest["bytes_after"] * 5 < dest["bytes_before"]


def test_categorical_source_and_quarantined_rows():
    frame = pd.DataFrame(
        {
            "origin": pd.Categorical(["JFK", "EWR", "XXX", "JFK"]),
            "tailnum": ["N1", None, "N1", "N2"],
            "dest": ["BOS", "BOS", "LAX", "ORD"],
            "distance": [1.0, 2.0, 3.0, 4.0],
        }
    )
    out = run(frame)
    assert out.report.rows_quarantined == 1  # XXX is outside the domain
    entry = out.report.text_encoding["origin"]
    assert entry["source_dtype"] == "category"
    assert entry["bytes_before"] == frame["origin"].memory_usage(index=False, deep=True)
    assert entry["rows"] == 4 and entry["distinct"] == 3 and entry["codes_bytes"] == 16


def test_csv_source_report_json_and_fit_report(flights_csv, tmp_path):
    fitted, out = fp.Pipeline(SCHEMA, FEATURES).fit_and_transform(flights_csv)
    assert fitted.fit_report.text_encoding == out.report.text_encoding
    out.save(tmp_path)
    saved = fp.open_output(tmp_path).report
    assert saved["text_encoding"] == out.report.text_encoding
    assert "dictionary-encoded" in out.report.summary()
    again = fitted.transform(flights_csv)
    assert again.report.text_encoding == out.report.text_encoding


def test_empty_and_all_missing_text():
    frame = pd.DataFrame(
        {
            "origin": pd.Series([], dtype="str"),
            "tailnum": pd.Series([], dtype=object),
            "dest": pd.Series([], dtype="str"),
            "distance": pd.Series([], dtype=np.float64),
        }
    )
    fitted = fp.Pipeline(SCHEMA, [fp.col("tailnum") >> fp.Categorify()])
    nulls = pd.DataFrame({"tailnum": pd.Series([None, None], dtype=object)})
    out = fitted.fit_transform(nulls)
    entry = out.report.text_encoding["tailnum"]
    assert entry["distinct"] == 0 and entry["strings_bytes"] == 0 and entry["codes_bytes"] == 8
    empty = run(frame)
    assert empty.X.shape[0] == 0
    assert {e["bytes_after"] for e in empty.report.text_encoding.values()} == {0}
