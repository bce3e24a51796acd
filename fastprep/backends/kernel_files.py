"""Generated Numba modules on disk: written once per source, imported once per process.

Why files: ``@njit(cache=True)`` caches machine code next to a function's source file, so a
kernel generated at run time must live in a real module for a second process to load its
compiled code instead of compiling it again. The file name is a hash of the source.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

_LOADED: dict[str, ModuleType] = {}


def cache_dir() -> Path:
    """Where generated kernel modules (and Numba's cache beside them) live:
    ``$FASTPREP_CACHE_DIR/kernels`` (default ``~/.cache/fastprep/kernels``)."""
    root = os.environ.get("FASTPREP_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "fastprep"
    )
    path = Path(root) / "kernels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def source_key(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:20]


def is_loaded(key: str) -> bool:
    return key in _LOADED


def any_loaded() -> bool:
    """Whether this process has loaded any generated kernel module yet."""
    return bool(_LOADED)


def indent(lines: list[str], depth: int) -> list[str]:
    """``lines`` of generated source, ``depth`` levels (4 spaces each) deeper."""
    return [" " * (4 * depth) + line for line in lines]


def is_on_disk(key: str, prefix: str = "fp") -> bool:
    return (cache_dir() / f"{prefix}_{key}.py").exists()


def load_module(source: str, prefix: str = "fp") -> ModuleType:
    """The module of ``source`` (written to the cache folder once, atomically)."""
    key = source_key(source)
    module = _LOADED.get(key)
    if module is None:
        path = cache_dir() / f"{prefix}_{key}.py"
        if not path.exists():
            temporary = path.with_suffix(f".tmp{os.getpid()}")
            temporary.write_text(source)
            os.replace(temporary, path)
        spec = importlib.util.spec_from_file_location(f"fastprep_kernels.{prefix}_{key}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        _LOADED[key] = module
    return module


def numba_cached(kernel: Any, qualname: str | None = None) -> bool:
    """Whether the Numba dispatcher ``kernel`` runs without compiling: compiled in this
    process already, or its on-disk cache index (``cache=True``) exists. (``qualname``:
    for a generated module's kernel, not handled by this minimal check: False.)"""
    if qualname is not None:
        return False
    if getattr(kernel, "overloads", None):
        return True
    cache_file = getattr(getattr(kernel, "_cache", None), "_cache_file", None)
    index = getattr(cache_file, "_index_path", None)
    return index is not None and os.path.exists(index)


def numba_loaded(kernel: Any) -> bool:
    """Whether ``kernel`` has machine code in this process already (no load, no compile)."""
    return bool(getattr(kernel, "overloads", None))
