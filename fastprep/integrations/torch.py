"""Hand-off to PyTorch (optional extra ``fastprep[torch]``): tensors and an IterableDataset.

Why a bridge module: the core never imports torch (it is large and optional); this module
imports it only when called and says what to install when it is missing.

- Dense X becomes ``torch.from_numpy(X)`` — zero-copy, the tensor shares the array's memory;
  float16 stays float16, and bfloat16 output (uint16 bit patterns) is *viewed* as
  ``torch.bfloat16`` without a copy.
- CSR X becomes ``torch.sparse_csr_tensor(indptr, indices, data)`` over the same three
  arrays (zero-copy on the CPU).
- ``device="cuda"`` moves the tensors when CUDA is available and otherwise warns and stays on
  the CPU, so one training script runs on both kinds of machine.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from fastprep.pipeline import FittedPipeline
    from fastprep.runtime.execute import Output

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
    """``torch.device(device)``; CUDA without a GPU falls back to the CPU with a warning."""
    torch = require_torch()
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        warnings.warn(
            f"device={device!r}: CUDA is not available on this machine; using the CPU",
            RuntimeWarning,
            stacklevel=3,
        )
        return torch.device("cpu")
    return resolved


def to_tensor(X: Any, out_dtype: str = "float32", device: Any = "cpu") -> Any:
    """A dense array or CSR matrix as a torch tensor (zero-copy on the CPU)."""
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


def _values(torch: Any, array: np.ndarray, out_dtype: str) -> Any:
    if out_dtype == "bfloat16":  # uint16 bit patterns -> the same bits as torch.bfloat16
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def output_to_torch(output: Output, device: Any = "cpu") -> tuple[Any, Any]:
    """``(X, y)`` of an :class:`~fastprep.runtime.execute.Output` as tensors (``y`` may be None)."""
    X = to_tensor(output.X, output.out_dtype, device)
    y = None if output.y is None else to_tensor(output.y, "float32", device)
    return X, y


def _make_dataset_class() -> type:
    torch = require_torch()

    class BatchDataset(torch.utils.data.IterableDataset):
        """Batches of :meth:`FittedPipeline.batches` as ``(X, y)`` tensors.

        Use with ``DataLoader(dataset, batch_size=None)`` (the batches are already made).
        Every pass over the dataset is the next epoch (reshuffled when ``shuffle=True``);
        ``set_epoch(n)`` picks one. With ``num_workers=k`` each worker streams every k-th
        partition. ``stats`` is the last pass's :class:`~fastprep.runtime.batches.BatchStats`.
        """

        def __init__(
            self, fitted: FittedPipeline, source: Any, *, device: Any = "cpu", **options: Any
        ) -> None:
            super().__init__()
            self.fitted, self.source, self.device = fitted, source, device
            self.epoch = int(options.pop("epoch", 0))
            self.options = options
            self.stats: Any = None
            self.alerts_seen: set[tuple[str, str, str]] = set()  # its epochs alert once

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

        def __iter__(self) -> Iterator[tuple[Any, Any]]:
            info = torch.utils.data.get_worker_info()
            shard = None if info is None else (info.id, info.num_workers)
            stream = self.fitted.batches(
                self.source, epoch=self.epoch, shard=shard, alerts_seen=self.alerts_seen,
                **self.options,
            )  # fmt: skip
            self.epoch += 1
            dtype = stream.precision.out_dtype
            for batch in stream:
                X = to_tensor(batch[0], dtype, self.device)
                rest = tuple(
                    None if a is None else to_tensor(a, "float32", self.device) for a in batch[1:]
                )
                yield (X, *rest)
            self.stats = stream.stats

    return BatchDataset


_CLASSES: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    if name == "BatchDataset":
        if name not in _CLASSES:
            _CLASSES[name] = _make_dataset_class()
        return _CLASSES[name]
    raise AttributeError(name)
