"""The numeric part of the flights pipeline alone: the kernel benchmarks' dense, fused workload.

Fill, clip, log1p, two derived expressions and standardize/min-max of 4 outputs, plus the
target; every step element-wise or a fitted affine map, so it runs as one fused stage.
"""

import fastprep as fp

sample = "../data_samples/flights.parquet"

schema = fp.Schema({
    "dep_delay": fp.Float(nullable=True, min=-120, max=2000),
    "arr_delay": fp.Float(nullable=False),
    "air_time": fp.Float(nullable=True, min=0),
    "distance": fp.Float(min=0),
    "hour": fp.Int(min=0, max=24), "minute": fp.Int(min=0, max=59),
})  # fmt: skip

pipeline = fp.Pipeline(
    schema=schema,
    features=[
        fp.cols("dep_delay") >> fp.FillMissing(0) >> fp.Clip(-60, 600) >> fp.Standardize(),
        fp.col("distance") >> fp.Log1p() >> fp.Standardize(),
        fp.expr("speed = distance / air_time * 60") >> fp.FillMissing("median") >> fp.Standardize(),
        fp.expr("dep_hour = hour + minute / 60") >> fp.MinMax(),
    ],
    target=fp.expr("late = arr_delay > 15"),
    sample=sample,
    name="flights_numeric",
)
