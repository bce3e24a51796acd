"""Which backends exist, what they can run, and how ``"auto"`` resolves.

Backends register by name with the step types they implement; optional dependencies are
imported lazily, so a missing extra only matters when that backend is asked for.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from typing import Any

from fastprep.errors import BackendError


@dataclass(frozen=True)
class BackendInfo:
    """A backend's name, its module, the packages it needs, and a one-line description."""

    name: str
    module: str
    requires: tuple[str, ...]
    description: str


_BACKENDS: dict[str, BackendInfo] = {}


def register(info: BackendInfo) -> None:
    _BACKENDS[info.name] = info


register(
    BackendInfo(
        "pandas",
        "fastprep.backends.reference.backend",
        ("numpy", "pandas"),
        "numpy-vectorized reference path; numpy MurmurHash3 of distinct tokens for Hash",
    )
)


def load_backend(name: str) -> Any:
    """The backend module (``fit_stage`` / ``run_stage``) for ``name`` (or ``"auto"``)."""
    return importlib.import_module(resolve(name).module)


register(
    BackendInfo(
        "numba",
        "fastprep.backends.numba.backend",
        ("numba",),
        "element-wise chains fused into parallel Numba JIT kernels (cached on disk)",
    )
)
register(
    BackendInfo(
        "numexpr",
        "fastprep.backends.numexpr",
        ("numexpr",),
        "element-wise chains evaluated as one numexpr expression per output column",
    )
)


def available() -> list[str]:
    return sorted(_BACKENDS)


def resolve(name: str) -> BackendInfo:
    """``"auto"`` picks the best registered backend (the cost-based planner refines this)."""
    if name == "auto":
        name = "pandas"
    if name not in _BACKENDS:
        raise BackendError(
            f"unknown backend {name!r}; available: {', '.join(['auto', *available()])}"
        )
    info = _BACKENDS[name]
    for package in info.requires:  # found, not imported: importing is the backend's business
        if package not in sys.modules and importlib.util.find_spec(package) is None:
            raise BackendError(
                f"backend {name!r} needs the package {package!r}: pip install {package}"
            )
    return info
