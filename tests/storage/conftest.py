"""Pipelines for the output tests: the bundled flights pipeline (CSR) and a dense variant."""

from __future__ import annotations

import pytest

import fastprep as fp


def dense_flights_pipeline() -> fp.Pipeline:
    """``pipelines/flights.py`` without the hashed block: every column dense (25 columns)."""
    schema = fp.Schema({
        "dep_delay": fp.Float(nullable=True, min=-120, max=2000),
        "arr_delay": fp.Float(nullable=False),
        "air_time": fp.Float(nullable=True, min=0),
        "distance": fp.Float(min=0),
        "hour": fp.Int(min=0, max=24), "minute": fp.Int(min=0, max=59),
        "origin": fp.Category(["EWR", "JFK", "LGA"]),
        "carrier": fp.Category(),
    })  # fmt: skip
    return fp.Pipeline(
        schema=schema,
        features=[
            fp.cols("dep_delay") >> fp.FillMissing(0) >> fp.Clip(-60, 600) >> fp.Standardize(),
            fp.col("distance") >> fp.Log1p() >> fp.Standardize(),
            fp.expr("speed = distance / air_time * 60")
            >> fp.FillMissing("median")
            >> fp.Standardize(),
            fp.expr("dep_hour = hour + minute / 60") >> fp.MinMax(),
            fp.cols("origin", "carrier") >> fp.OneHot(),
        ],
        target=fp.expr("late = arr_delay > 15"),
    )


@pytest.fixture
def dense_pipeline() -> fp.Pipeline:
    return dense_flights_pipeline()
