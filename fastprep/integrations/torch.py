"""PyTorch integration (optional extra ``fastprep[torch]``): tensors and an IterableDataset.

The core never imports torch (it is large and optional). The array-to-tensor conversion
(:mod:`fastprep.emit.tensors`, which ``Output.to_torch`` uses) and the ``IterableDataset`` of
batches (:mod:`fastprep.runtime.torch_batches`, which ``FittedPipeline.torch_dataset`` hands
out; its class is made on first access) are re-exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastprep.emit.tensors import CPU_INDEX, INSTALL_HINT, require_torch, resolve_device, to_tensor

if TYPE_CHECKING:
    from fastprep.runtime.execute import Output

__all__ = [
    "CPU_INDEX",
    "INSTALL_HINT",
    "output_to_torch",
    "require_torch",
    "resolve_device",
    "to_tensor",
]


def output_to_torch(output: Output, device: Any = "cpu") -> tuple[Any, Any]:
    """``(X, y)`` of an :class:`~fastprep.runtime.execute.Output` as tensors (``y`` may be None)."""
    return output.to_torch(device)


def __getattr__(name: str) -> Any:
    if name == "BatchDataset":  # made (torch imported) on first access
        from fastprep.runtime import torch_batches

        return torch_batches.BatchDataset
    raise AttributeError(name)
