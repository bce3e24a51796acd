"""Output arrays as PyTorch tensors (optional extra ``fastprep[torch]``).

Why here, below the run engine: ``Output.to_torch`` needs only the conversion of arrays, not
the dataset class of :mod:`fastprep.integrations.torch`; torch (large and optional) is
imported only when a conversion runs, with a message saying what to install when missing.

- Dense X becomes ``torch.from_numpy(X)`` — zero-copy, the tensor shares the array's memory;
  float16 stays float16, and bfloat16 output (uint16 bit patterns) is *viewed* as
  ``torch.bfloat16`` without a copy.
- CSR X becomes ``torch.sparse_csr_tensor(indptr, indices, data)`` over the same three
  arrays (zero-copy on the CPU).
- ``device="cuda"`` (or ``"mps"``, ``"xpu"``) moves the tensors when that GPU is available
  and otherwise warns and stays on the CPU, so one training script runs on both kinds of
  machine.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

#: PyPI's Linux torch wheels pull the CUDA libraries (GBs); a CPU machine wants the CPU index
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
INSTALL_HINT = (
    f"pip install torch --index-url {CPU_INDEX} (CPU build; omit --index-url for CUDA), "
    "then pip install fastprep[torch]"
)


def require_torch() -> Any:
    """The ``torch`` module, or an ImportError that says how to install it."""
    try:
        import torch
    except ImportError as exc:
        raise ImportError(f"this needs PyTorch, which is not installed: {INSTALL_HINT}") from exc
    return torch


def resolve_device(device: Any = "cpu") -> Any:
    """``torch.device(device)``; a GPU the machine lacks (CUDA, Apple's ``mps``, Intel's
    ``xpu``, ...) falls back to the CPU with a warning; a name torch does not know is a
    ``ValueError``."""
    torch = require_torch()
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device={device!r} is not a torch device: {exc}") from exc
    if not _available(torch, resolved.type):
        name = "CUDA" if resolved.type == "cuda" else repr(resolved.type)
        warnings.warn(
            f"device={device!r}: {name} is not available on this machine; using the CPU",
            RuntimeWarning,
            stacklevel=3,
        )
        return torch.device("cpu")
    return resolved


def _available(torch: Any, kind: str) -> bool:
    """Whether this torch build and machine have devices of ``kind`` (a kind without an
    ``is_available`` check is left to torch)."""
    if kind == "mps":  # its check lives in torch.backends on every torch >= 2.1
        return bool(torch.backends.mps.is_available())
    check = getattr(getattr(torch, kind, None), "is_available", None)
    return True if kind == "cpu" or not callable(check) else bool(check())


def to_tensor(X: Any, out_dtype: str = "float32", device: Any = "cpu") -> Any:
    """A dense array or CSR matrix as a torch tensor (zero-copy on the CPU)."""
    import scipy.sparse as sp

    torch = require_torch()
    target = resolve_device(device)
    if sp.issparse(X):
        values = _values(torch, X.data, out_dtype)
        crow = torch.from_numpy(np.ascontiguousarray(X.indptr))
        col = torch.from_numpy(np.ascontiguousarray(X.indices))
        if crow.dtype != col.dtype:
            crow, col = crow.to(torch.int64), col.to(torch.int64)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            tensor = torch.sparse_csr_tensor(
                crow, col, values, size=tuple(X.shape), check_invariants=False
            )
    else:
        tensor = _values(torch, np.ascontiguousarray(X), out_dtype)
    return tensor if target.type == "cpu" else tensor.to(target)


def to_tensors(
    X: Any, y: np.ndarray | None, out_dtype: str, device: Any = "cpu"
) -> tuple[Any, Any]:
    """``(X, y)`` as tensors (``y``, float32, may be None)."""
    device = resolve_device(device)  # once: a fallback warns once, not per tensor
    return to_tensor(X, out_dtype, device), None if y is None else to_tensor(y, "float32", device)


def _values(torch: Any, array: np.ndarray, out_dtype: str) -> Any:
    if out_dtype == "bfloat16":  # uint16 bit patterns -> the same bits as torch.bfloat16
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)
