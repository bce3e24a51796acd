"""The competitors by name: how to build each one's ``run(df) -> (X, y)`` from a pipeline.

Extension point: :func:`register_implementation`. ``"dask-ml"`` is not one of this
single-machine comparison's competitors (it runs on a Dask cluster, in
``benchmarks/bench_cluster.py``): asking for it raises ``NotImplementedError`` saying so
instead of silently skipping it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastprep.bench.common import Result, RunFn

NAIVE = "naive-pandas"
IDIOMATIC = "pandas"


@dataclass(frozen=True)
class Implementation:
    """A named competitor: ``factory(pipeline)`` returns its ``run(df) -> (X, y)``."""

    name: str
    label: str
    factory: Callable[[Any], RunFn]
    #: measured on a sample and extrapolated per row above ``--naive-sample`` rows
    sampled: bool = False


_REGISTRY: dict[str, Implementation] = {}
#: names that are not competitors here: asking for one explains where it is compared
ELSEWHERE: dict[str, str] = {
    "dask-ml": "dask-ml runs on a Dask cluster: it is compared in "
    "benchmarks/bench_cluster.py; to time it here, register it with "
    "fastprep.bench.impls.register_implementation(Implementation('dask-ml', ...))",
}


def register_implementation(impl: Implementation) -> None:
    """Add (or replace) a competitor; the harness gates and times every registered one."""
    _REGISTRY[impl.name] = impl


def _naive(pipeline: Any) -> RunFn:
    from fastprep.bench import naive

    return naive.make(pipeline)


def _pandas(pipeline: Any) -> RunFn:
    from fastprep.bench import translate_pandas

    return translate_pandas.make(pipeline)


def _sklearn(pipeline: Any) -> RunFn:
    from fastprep.bench import translate_sklearn

    return translate_sklearn.make(pipeline)


def _polars(pipeline: Any) -> RunFn:
    from fastprep.bench import translate_polars

    return translate_polars.make(pipeline)


def fastprep_factory(backend: str) -> Callable[[Any], RunFn]:
    """fastprep itself: ``pipeline.fit_transform(df, backend=b)`` (fit and transform the
    same frame, reading and validating it once; sklearn runs its ``fit_transform`` too)."""

    def factory(pipeline: Any) -> RunFn:
        def run(df: Any) -> Result:
            out = pipeline.fit_transform(df, backend=backend)
            return out.X, out.y

        return run

    return factory


register_implementation(Implementation(NAIVE, "naive pandas (apply axis=1)", _naive, True))
register_implementation(Implementation(IDIOMATIC, "idiomatic pandas + numpy", _pandas))
register_implementation(Implementation("sklearn", "sklearn ColumnTransformer", _sklearn))
register_implementation(Implementation("polars", "Polars (lazy)", _polars))


def fastprep_names() -> list[str]:
    """``fastprep[auto]`` plus one per registered backend (new backends appear on their own)."""
    from fastprep.backends.registry import available

    return ["fastprep[auto]", *(f"fastprep[{name}]" for name in available())]


def get(name: str) -> Implementation:
    """Look up a competitor by name (fastprep[...] names are built on demand)."""
    if name.startswith("fastprep[") and name.endswith("]"):
        backend = name[len("fastprep[") : -1]
        return Implementation(name, f"fastprep, backend={backend}", fastprep_factory(backend))
    if name in _REGISTRY:
        return _REGISTRY[name]
    if name in ELSEWHERE:
        raise NotImplementedError(ELSEWHERE[name])
    raise KeyError(f"unknown implementation {name!r}; known: {', '.join(all_names())}")


def all_names() -> list[str]:
    return [*_REGISTRY, *fastprep_names()]
