"""Fitted state on disk: a zip of ``state.json`` + ``arrays.npz`` — never pickle.

The JSON carries a format name and version and the SHA-256 of the arrays file and of its
own body; loading checks all three and reads arrays with ``allow_pickle=False``, so a
tampered, truncated or future-format file is a clear :class:`StateFormatError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import zipfile
from typing import Any

import numpy as np

from fastprep.errors import OutputError, StateFormatError

FORMAT = "fastprep-state"
VERSION = 1
_DOC = "state.json"
_ARRAYS = "arrays.npz"


_FLOAT_TAG = "$float"


def encode_floats(value: Any) -> Any:
    """JSON has no inf/NaN: write them as ``{"$float": "inf"}`` (e.g. an inf category)."""
    if isinstance(value, float) and not math.isfinite(value):
        return {_FLOAT_TAG: repr(value)}
    if isinstance(value, np.ndarray):  # a fitted array in a fingerprint: its values
        return encode_floats(value.tolist())
    if isinstance(value, dict):
        return {k: encode_floats(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode_floats(v) for v in value]
    return value


def decode_floats(value: Any) -> Any:
    """Inverse of :func:`encode_floats`; only the three non-finite spellings are accepted."""
    if isinstance(value, dict):
        if set(value) == {_FLOAT_TAG}:
            text = value[_FLOAT_TAG]
            if text not in ("inf", "-inf", "nan"):
                raise StateFormatError(f"bad non-finite float {text!r} in a state file")
            return float(text)
        return {k: decode_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_floats(v) for v in value]
    return value


_ARRAY_TAG = "$array"


def split_arrays(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    """``value`` with each ``ndarray`` (fitted bin edges, quantiles) replaced by
    ``{"$array": key}`` and stored in ``arrays`` under that key (the state's npz file)."""
    if isinstance(value, np.ndarray):
        key = f"a{len(arrays)}"
        arrays[key] = value
        return {_ARRAY_TAG: key}
    if isinstance(value, dict):
        return {k: split_arrays(v, arrays) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [split_arrays(v, arrays) for v in value]
    return value


def join_arrays(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    """Inverse of :func:`split_arrays`; a reference to a missing array is an error."""
    if isinstance(value, dict):
        if set(value) == {_ARRAY_TAG}:
            key = value[_ARRAY_TAG]
            if not isinstance(key, str) or key not in arrays:
                raise StateFormatError(f"the state refers to a missing array {key!r}")
            return arrays[key]
        return {k: join_arrays(v, arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [join_arrays(v, arrays) for v in value]
    return value


def write_state(
    path: str | os.PathLike[str], doc: dict[str, Any], arrays: dict[str, np.ndarray]
) -> None:
    """Write atomically: to a temporary name in the same folder, then rename."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    array_bytes = buffer.getvalue()
    body = json.dumps(doc, sort_keys=True, allow_nan=False)
    envelope = {
        "format": FORMAT,
        "version": VERSION,
        "arrays_sha256": hashlib.sha256(array_bytes).hexdigest(),
        "body_sha256": hashlib.sha256(body.encode()).hexdigest(),
        "body": json.loads(body),
    }
    target = os.fspath(path)
    temporary = f"{target}.tmp-{os.getpid()}"
    try:
        with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.writestr(_DOC, json.dumps(envelope, sort_keys=True, indent=1,
                                              allow_nan=False))  # fmt: skip
            archive.writestr(_ARRAYS, array_bytes)
        os.replace(temporary, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            cause = exc.strerror or str(exc)
            raise OutputError(f"{target}: the fitted state could not be written ({cause}); "
                              "a file there before is kept as it was") from exc  # fmt: skip
        raise


def read_state(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read and verify a state file; returns ``(doc, arrays)``."""
    target = os.fspath(path)
    if not os.path.exists(target):
        raise StateFormatError(f"no fitted state at {target!r}")
    try:
        with zipfile.ZipFile(target) as archive:
            envelope = json.loads(archive.read(_DOC))
            array_bytes = archive.read(_ARRAYS)
    except (zipfile.BadZipFile, KeyError, json.JSONDecodeError, OSError, EOFError) as exc:
        raise StateFormatError(f"{target!r} is not a readable fastprep state file: {exc}") from None
    if not isinstance(envelope, dict) or envelope.get("format") != FORMAT:
        raise StateFormatError(f"{target!r} is not a fastprep state file")
    version = envelope.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise StateFormatError(
            f"{target!r} has state format version {version!r}; this fastprep reads up to "
            f"{VERSION}: upgrade fastprep to load it"
        )
    body = json.dumps(envelope.get("body"), sort_keys=True, allow_nan=False)
    if hashlib.sha256(body.encode()).hexdigest() != envelope.get("body_sha256"):
        raise StateFormatError(f"{target!r}: the state description fails its checksum (modified?)")
    if hashlib.sha256(array_bytes).hexdigest() != envelope.get("arrays_sha256"):
        raise StateFormatError(
            f"{target!r}: the arrays fail their checksum (modified or truncated?)"
        )
    try:
        with np.load(io.BytesIO(array_bytes), allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except (ValueError, OSError) as exc:
        raise StateFormatError(f"{target!r}: cannot read arrays: {exc}") from None
    return envelope["body"], arrays
