"""Generated Numba modules on disk: written once per source, imported once per process.

Why files: ``@njit(cache=True)`` caches machine code next to a function's source file, so a
kernel generated at run time must live in a real module for a second process to load its
compiled code instead of compiling it again. The file name is a hash of the source.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import os
import sys
import threading
from collections.abc import Callable
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
        _bind_lazy(module)
        _LOADED[key] = module
    return module


# ------------------------------------------------------------------ lazy Numba kernels


class LazyKernel:
    """A ``numba.njit`` kernel made on first use, so that importing the module that
    defines it imports no Numba (0.3 s) when a run never needs the kernel.

    Until then it is a plain function; :func:`materialize` turns every lazy kernel of its
    module into a real dispatcher at once (kernels call each other by their global names,
    which Numba must see as dispatchers) and swaps the module's ``prange`` for Numba's.
    Numba's disk cache keys on the function's file and first line, as with ``@njit``.
    """

    def __init__(self, func: Callable[..., Any], options: dict[str, Any]) -> None:
        functools.update_wrapper(self, func)
        self.py_func = func
        self.options = options
        self.dispatcher: Any = None

    def __call__(self, *args: Any) -> Any:
        return (self.dispatcher or materialize(self))(*args)

    def __getattr__(self, name: str) -> Any:  # overloads, signatures, compile, stats ...
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.dispatcher or materialize(self), name)

    def __repr__(self) -> str:
        state = "compiled" if self.dispatcher is not None else "not made yet"
        return f"<lazy Numba kernel {self.py_func.__module__}.{self.py_func.__qualname__}: {state}>"


_LAZY: dict[str, list[LazyKernel]] = {}
_LOCK = threading.RLock()


def jit(**options: Any) -> Callable[[Callable[..., Any]], LazyKernel]:
    """``@jit(cache=True, ...)``: ``numba.njit`` with these options, made on first use."""

    def wrap(func: Callable[..., Any]) -> LazyKernel:
        kernel = LazyKernel(func, options)
        _LAZY.setdefault(func.__module__, []).append(kernel)
        return kernel

    return wrap


#: stands in for ``numba.prange`` in a module of lazy kernels until they are made
prange = range


class LazyIntrinsic:
    """A Numba intrinsic a module of lazy kernels calls by a global name: the module
    (which imports Numba) named here is imported when the kernels are made, and the
    global replaced by the intrinsic (:func:`materialize`)."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __call__(self, *args: Any) -> Any:
        raise RuntimeError(f"{self.module}.{self.name} runs only inside a compiled kernel")

    def __repr__(self) -> str:
        return f"<lazy Numba intrinsic {self.module}.{self.name}>"


def intrinsic(module: str, name: str) -> LazyIntrinsic:
    """The intrinsic ``name`` of ``module`` for this module's lazy kernels (``module``
    imported only when they are made: it may import Numba at its top)."""
    return LazyIntrinsic(module, name)


def materialize(kernel: LazyKernel) -> Any:
    """Make every lazy kernel of ``kernel``'s module (and of modules it calls into) a
    Numba dispatcher, replacing the module's globals; returns ``kernel``'s dispatcher."""
    with _LOCK:
        if kernel.dispatcher is None:
            _materialize_module(kernel.py_func.__module__)
    return kernel.dispatcher


#: dispatchers made but not handed out yet (under ``_LOCK``): the kernels' ``dispatcher``
#: is set only when the outermost :func:`_materialize_module` has bound every global their
#: modules name. Another thread calls a kernel whose dispatcher is set without the lock:
#: made earlier, it compiled against the lazy stand-ins still bound (an untyped global),
#: and Numba keeps that error for the process
_MAKING: dict[LazyKernel, Any] = {}
_DEPTH = [0]


def _made(kernel: LazyKernel) -> Any:
    return kernel.dispatcher or _MAKING.get(kernel)


def _materialize_module(name: str) -> None:
    _DEPTH[0] += 1
    try:
        _bind_module(name)
        if _DEPTH[0] == 1:  # every module reached is bound: the kernels may be called
            for kernel, dispatcher in _MAKING.items():
                kernel.dispatcher = dispatcher
    finally:
        _DEPTH[0] -= 1
        if not _DEPTH[0]:
            _MAKING.clear()


def _bind_module(name: str) -> None:
    import numba

    module = sys.modules[name]
    if getattr(module, "prange", None) is prange:
        module.prange = numba.prange  # type: ignore[attr-defined]
    for kernel in _LAZY.get(name, []):
        if _made(kernel) is None:
            _MAKING[kernel] = numba.njit(**kernel.options)(kernel.py_func)
    for attribute, value in list(vars(module).items()):
        if isinstance(value, LazyIntrinsic):
            setattr(module, attribute, getattr(importlib.import_module(value.module), value.name))
        elif isinstance(value, LazyKernel):
            if _made(value) is None:  # a kernel of another module, called from here
                _bind_module(value.py_func.__module__)
            setattr(module, attribute, _made(value))
        elif isinstance(value, ModuleType) and any(  # kernels called as ``mm.kernel(...)``
            _made(k) is None for k in _LAZY.get(value.__name__, [])
        ):
            _bind_module(value.__name__)


def _bind_lazy(module: ModuleType) -> None:
    """A generated module's imported lazy kernels (``from fastprep.backends.numba.kernels
    import merge_range``), made real: its Numba kernels call them."""
    for attribute, value in list(vars(module).items()):
        if isinstance(value, LazyKernel):
            setattr(module, attribute, materialize(value))


# --------------------------------------------------------- is a kernel in Numba's cache?


def numba_cached(kernel: Any, qualname: str | None = None) -> bool:
    """Whether ``kernel`` runs without compiling: compiled in this process already, or
    found in Numba's on-disk cache (``cache=True``) for its current source. Never imports
    Numba.

    ``kernel``: a Numba dispatcher, a :class:`LazyKernel`, or the path of a module file
    (a generated kernel module) with ``qualname`` the function's name in it. The disk
    check is per function, not per signature: a kernel cached for int64 input but called
    with float64 still compiles (the planner's prediction is then optimistic)."""
    if qualname is not None:
        return _index_fresh(Path(kernel), qualname, None)
    real = kernel.dispatcher if isinstance(kernel, LazyKernel) else kernel
    if real is not None and getattr(real, "overloads", None):
        return True
    func = kernel.py_func
    source = Path(inspect.getfile(func))
    return _index_fresh(source, func.__qualname__, func.__code__.co_firstlineno)


def numba_loaded(kernel: Any) -> bool:
    """Whether ``kernel`` has machine code in this process already (no load, no compile)."""
    real = kernel.dispatcher if isinstance(kernel, LazyKernel) else kernel
    return real is not None and bool(getattr(real, "overloads", None))


def _numba_cache_dirs(source: Path) -> list[Path]:
    """Where Numba would keep ``source``'s cache: ``$NUMBA_CACHE_DIR/<dir>_<sha1>`` if
    set, else ``__pycache__`` beside it if writable, else the user-wide cache (the order
    of Numba's own cache locators)."""
    folder = os.path.dirname(os.path.abspath(source))  # as Numba names it (no symlinks resolved)
    subpath = os.path.basename(folder) + "_" + hashlib.sha1(folder.encode()).hexdigest()
    explicit = os.environ.get("NUMBA_CACHE_DIR")
    if explicit:
        return [Path(explicit) / subpath]
    user = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    in_tree = Path(folder) / "__pycache__"
    writable = os.access(in_tree if in_tree.exists() else folder, os.W_OK)
    return ([in_tree] if writable else []) + [Path(user) / "numba" / subpath]


def _index_fresh(source: Path, qualname: str, lineno: int | None) -> bool:
    """Numba's index of ``qualname`` exists, was written by this Numba version and for
    ``source`` as it is now (Numba stamps an index with the sha256 of the source: its
    32 bytes appear verbatim in the index file)."""
    try:
        stamp = _source_digest(str(source), *_stat(source))
    except OSError:
        return False
    key = (str(source), stamp, qualname, lineno)
    if key in _FRESH:
        return True
    tag = "" if lineno is None else str(lineno)
    pattern = f"{source.stem}.{qualname.replace('<', '').replace('>', '')}-{tag or '*'}"
    pattern += f".py{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}.nbi"
    for folder in _numba_cache_dirs(source):
        candidates = [folder / pattern] if tag else list(folder.glob(pattern))
        for index in candidates:
            try:
                content = index.read_bytes()
            except OSError:
                continue
            if _numba_version().encode() in content[:64] and stamp in content:
                _FRESH.add(key)
                return True
    return False


#: kernels found cached, by source file and its digest: a run asks about its kernels
#: dozens of times (each validated column, each text column, each helper), ~0.13 ms each
#: to glob the cache folder and read the index; a kernel once cached stays so for the
#: process (a source edited since has another digest, hence another key)
_FRESH: set[tuple[str, bytes, str, int | None]] = set()


def _stat(path: Path) -> tuple[float, int]:
    st = path.stat()
    return st.st_mtime, st.st_size


@functools.lru_cache(maxsize=256)
def _source_digest(path: str, mtime: float, size: int) -> bytes:
    return hashlib.sha256(Path(path).read_bytes()).digest()


@functools.lru_cache(maxsize=1)
def _numba_version() -> str:
    """Numba's version without importing it (nor ``importlib.metadata``, 40 ms): from its
    ``dist-info`` folder beside the package."""
    numba = sys.modules.get("numba")
    if numba is not None:
        return str(numba.__version__)
    spec = importlib.util.find_spec("numba")
    if spec is None or spec.origin is None:
        return "\0no numba"
    for info in Path(spec.origin).parent.parent.glob("numba-*.dist-info"):
        return info.name[len("numba-") : -len(".dist-info")]
    from importlib.metadata import version

    return version("numba")
