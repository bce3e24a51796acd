"""Which backends exist and which may run: the one place that decides.

Backends register by name with the packages they need; optional dependencies are found,
not imported, so a missing extra only matters when that backend is asked for.
:func:`resolve` answers for a name asked for (an error naming the fix when it cannot
run), :func:`forced` for a run's ``backend=`` setting, :func:`candidates` for the
backends ``"auto"`` may give a stage (:mod:`fastprep.backends.stages` asks the planner
which of them is cheapest, per stage).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass

from fastprep.backends.base import Backend
from fastprep.errors import BackendError


@dataclass(frozen=True)
class BackendInfo:
    """A backend's name, its module, the packages it needs, and a one-line description."""

    name: str
    module: str
    requires: tuple[str, ...]
    description: str
    #: ``"auto"`` may pick it for a stage (the planner's cost model knows it)
    auto: bool = False


_BACKENDS: dict[str, BackendInfo] = {}


def register(info: BackendInfo) -> None:
    _BACKENDS[info.name] = info


register(
    BackendInfo(
        "pandas",
        "fastprep.backends.reference.backend",
        ("numpy", "pandas"),
        "numpy-vectorized reference path; numpy MurmurHash3 of distinct tokens for Hash",
        auto=True,
    )
)


def load_backend(name: str) -> Backend:
    """The backend module for ``name`` (or ``"auto"``): it implements :class:`Backend`."""
    return importlib.import_module(resolve(name).module)  # type: ignore[return-value]


register(
    BackendInfo(
        "numba",
        "fastprep.backends.numba.backend",
        ("numba",),
        "element-wise chains fused into parallel Numba JIT kernels (cached on disk)",
        auto=True,
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
    missing = _missing_package(info)
    if missing is not None:
        raise BackendError(f"backend {name!r} needs the package {missing!r}: pip install {missing}")
    return info


def forced(name: str) -> str | None:
    """The backend a run's ``backend=`` setting forces on every stage (None: ``"auto"``,
    the planner chooses); an unknown or uninstalled name is an error here."""
    return None if name == "auto" else resolve(name).name


def candidates() -> list[str]:
    """The backends ``"auto"`` may give a stage: registered for it and installed."""
    return [name for name, info in _BACKENDS.items() if info.auto and installed(name)]


def installed(name: str) -> bool:
    """Whether backend ``name``'s packages are present (found, not imported)."""
    return _missing_package(_BACKENDS[name]) is None


def _missing_package(info: BackendInfo) -> str | None:
    for package in info.requires:  # found, not imported: importing is the backend's business
        if package not in sys.modules and importlib.util.find_spec(package) is None:
            return package
    return None
