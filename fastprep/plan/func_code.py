"""A Python function's identity by what it computes: a digest of its code, not its name.

Two lambdas share the name ``<lambda>``; a notebook cell run again defines a new function
object with the old name. Both are told apart (or recognised as the same) by this digest of
the bytecode, constants, names, defaults, closure values, the plain values (numbers,
text) of the globals it reads and the digests of the Python functions it calls. A saved state stores the digest, never the code itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from types import CodeType
from typing import Any

_PLAIN = (int, float, complex, str, bytes, bool, type(None))


def code_digest(func: Callable[..., Any], _seen: frozenset[int] = frozenset()) -> str:
    """16 hex digits identifying ``func``'s behaviour as far as its code shows it (a plain
    Python function it calls is identified by its own digest, recursively)."""
    _seen = _seen | {id(func)}
    digest = hashlib.sha256()
    code = getattr(func, "__code__", None)
    if code is None:  # a builtin or a callable object: its qualified name and type
        digest.update(f"{type(func).__qualname__}:{getattr(func, '__qualname__', '')}".encode())
        return digest.hexdigest()[:16]
    _feed_code(digest, code)
    digest.update(repr(_plain(getattr(func, "__defaults__", None))).encode())
    for cell in getattr(func, "__closure__", None) or ():
        try:
            digest.update(repr(_plain(cell.cell_contents)).encode())
        except ValueError:  # an empty cell
            digest.update(b"<empty>")
    namespace = getattr(func, "__globals__", {})
    for name in _global_names(code):
        if name not in namespace:
            continue
        value = namespace[name]
        if hasattr(value, "__code__") and id(value) not in _seen:  # a helper it calls
            digest.update(f"{name}=<function {code_digest(value, _seen)}>".encode())
        else:
            digest.update(f"{name}={_plain(value)!r}".encode())
    return digest.hexdigest()[:16]


def _feed_code(digest: Any, code: CodeType) -> None:
    digest.update(code.co_code)
    digest.update(repr(code.co_names).encode())
    digest.update(repr(code.co_varnames).encode())
    for const in code.co_consts:
        if isinstance(const, CodeType):
            _feed_code(digest, const)
        else:
            digest.update(repr(const).encode())


def _global_names(code: CodeType) -> list[str]:
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names += _global_names(const)
    return sorted(set(names))


def _plain(value: Any) -> Any:
    """Numbers and text by value; anything else by its type (a module, a function)."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(v, _PLAIN) for v in value):
        return tuple(value)
    if callable(value) and hasattr(value, "__code__"):
        return f"<function {getattr(value, '__qualname__', '')}>"
    return f"<{type(value).__qualname__}>"
