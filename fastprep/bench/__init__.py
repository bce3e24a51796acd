"""The benchmark suite: fastprep vs naive pandas, idiomatic pandas, sklearn and Polars.

Layer 4 (may import anything in fastprep). Entry points: ``fastprep bench`` (via
:func:`fastprep.bench.cli.add_parser`) and ``python -m benchmarks``. New competitors
register with :func:`fastprep.bench.impls.register_implementation`.

The harness is imported on first use of one of its names: every ``fastprep`` command builds
the ``bench`` sub-parser, and the harness's imports would otherwise be paid by ``fastprep run``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Config", "Implementation", "compare", "register_implementation", "run"]

_HOMES = {
    "Config": "harness",
    "compare": "harness",
    "run": "harness",
    "Implementation": "impls",
    "register_implementation": "impls",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'fastprep.bench' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"fastprep.bench.{_HOMES[name]}"), name)
