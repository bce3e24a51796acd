"""fastprep: declare a preprocessing pipeline in Python; get training-ready tensors, fast.

>>> import fastprep as fp
>>> schema = fp.Schema({"x": fp.Float(nullable=True), "c": fp.Category()})
>>> pipeline = fp.Pipeline(
...     schema=schema,
...     features=[fp.col("x") >> fp.FillMissing(0) >> fp.Standardize(), fp.col("c") >> fp.OneHot()],
... )
"""

import os as _os

# OpenMP threads that sleep when idle: GNU OpenMP's default spin-then-sleep
# wait made a 2-thread Numba kernel 10x slower (2.5 -> 24 ms) whenever the other core was
# busy, on this kind of shared 2-core machine. Read once, when Numba first loads libgomp;
# a value the user set wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import gc as _gc

# the cyclic collector paused while fastprep and what it needs (numpy, pyarrow) load:
# importing creates ~10^5 long-lived objects (modules, classes, functions) and almost no
# garbage, yet the young-generation collections they trigger scan them again and again:
# 6-15 ms of a fresh process's ~0.25 s import. Afterwards they are moved to the oldest
# generation, where they would have ended anyway (still collectable: freeze + unfreeze,
# not freeze alone), and the collector's state is restored. FASTPREP_PAUSE_GC=0: not paused
_gc_was_enabled = _gc.isenabled()
_gc_pause = _gc_was_enabled and _os.environ.get("FASTPREP_PAUSE_GC") != "0"
if _gc_pause:
    _gc.disable()
try:
    from fastprep.api import Dict, Tags, col, cols, cross, expr
    from fastprep.api.lookup import Lookup
    from fastprep.api.schema import (
        Bool,
        Category,
        Datetime,
        DictOf,
        Float,
        Int,
        ListOf,
        Schema,
        String,
    )
    from fastprep.errors import (
        BackendError,
        DataValidationError,
        ExprSyntaxError,
        FastprepError,
        FindingWarning,
        FitError,
        OutputError,
        PipelineDefinitionError,
        SchemaError,
        SourceError,
        SparseOutputError,
        StateFormatError,
    )
    from fastprep.pipeline import FittedPipeline, Pipeline, load
    from fastprep.plan.steps import (
        Bin,
        Categorify,
        Clip,
        CountEncode,
        FillMissing,
        GroupStats,
        Hash,
        Log1p,
        Map,
        MaxAbsScale,
        MinMax,
        OneHot,
        PowerTransform,
        QuantileTransform,
        RobustScale,
        Standardize,
        TargetEncode,
        Vectorize,
    )
    from fastprep.runtime.execute import Output
    from fastprep.runtime.memory import release_memory
    from fastprep.storage.shards import open_output
    from fastprep.validate import infer as _infer  # noqa: F401  (registers fp.Schema.infer)
finally:
    if _gc_pause:
        _gc.freeze()
        _gc.unfreeze()
        _gc.enable()

__version__ = "0.1.0"

__all__ = [
    "BackendError",
    "Bin",
    "Bool",
    "Categorify",
    "Category",
    "Clip",
    "CountEncode",
    "DataValidationError",
    "Datetime",
    "Dict",
    "DictOf",
    "ExprSyntaxError",
    "FastprepError",
    "FillMissing",
    "FindingWarning",
    "FitError",
    "FittedPipeline",
    "Float",
    "GroupStats",
    "Hash",
    "Int",
    "ListOf",
    "Log1p",
    "Lookup",
    "Map",
    "MaxAbsScale",
    "MinMax",
    "OneHot",
    "Output",
    "OutputError",
    "Pipeline",
    "PipelineDefinitionError",
    "PowerTransform",
    "QuantileTransform",
    "RobustScale",
    "Schema",
    "SchemaError",
    "SourceError",
    "SparseOutputError",
    "Standardize",
    "StateFormatError",
    "String",
    "Tags",
    "TargetEncode",
    "Vectorize",
    "col",
    "cols",
    "cross",
    "expr",
    "load",
    "open_output",
    "release_memory",
]
