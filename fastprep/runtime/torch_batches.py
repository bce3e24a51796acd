"""Training batches as PyTorch tensors: an ``IterableDataset`` over a :class:`BatchStream`.

Why in the run layer: ``FittedPipeline.torch_dataset`` (the façade) hands out this class,
and the façade imports only downward; the PyTorch integration
(:mod:`fastprep.integrations.torch`, which wraps the façade's objects) re-exports it. torch
(large and optional) is imported only when ``BatchDataset`` is first asked for; the tensors
are made by :mod:`fastprep.emit.tensors`, as ``Output.to_torch`` makes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fastprep.data.sources import collect_once, source_kind
from fastprep.emit.tensors import require_torch, resolve_device, to_tensor
from fastprep.runtime.batches import BatchStream

if TYPE_CHECKING:
    from fastprep.runtime.fitted import FittedState


def _make_dataset_class() -> type:
    torch = require_torch()

    class BatchDataset(torch.utils.data.IterableDataset):
        """Batches of :meth:`FittedPipeline.batches` (a :class:`BatchStream` over the fitted
        state) as ``(X, y)`` tensors.

        Use with ``DataLoader(dataset, batch_size=None)`` (the batches are already made).
        Every pass over the dataset is the next epoch (reshuffled when ``shuffle=True``);
        ``set_epoch(n)`` picks one. Through worker processes each pass's order also
        depends on the seed the DataLoader draws for it (from torch's generator:
        reproducible under ``torch.manual_seed``). With ``num_workers=k`` each worker streams every k-th
        partition. ``stats`` is the last pass's :class:`~fastprep.runtime.batches.BatchStats`.
        A Polars source (and a filtered Dataset) is made an Arrow table of the columns
        the pipeline reads here, once: see :func:`_fork_safe`.
        """

        def __init__(
            self, fitted: FittedState, source: Any, *, device: Any = "cpu", **options: Any
        ) -> None:
            super().__init__()
            self.fitted, self.device = fitted, device
            self.source = _fork_safe(source, fitted.schema.read_columns(fitted.plan.columns))
            self.epoch = int(options.pop("epoch", 0))
            self.options = options
            self.stats: Any = None
            self.alerts_seen: set[tuple[str, str, str]] = set()  # its epochs alert once

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

        def __iter__(self) -> Iterator[tuple[Any, Any]]:
            info = torch.utils.data.get_worker_info()
            shard = None if info is None else (info.id, info.num_workers)
            # a worker holds a copy of the dataset made when the DataLoader began this pass:
            # the epoch it counts is lost with it (unless workers persist), so the seed the
            # DataLoader drew for the pass (its workers' seeds less their ids: the same in
            # all of them, new each pass) is mixed into the shuffle
            pass_seed = None if info is None else info.seed - info.id
            stream = BatchStream(
                self.fitted, self.source, epoch=self.epoch, shard=shard, pass_seed=pass_seed,
                alerts_seen=self.alerts_seen, **self.options,
            )  # fmt: skip
            self.epoch += 1
            dtype = stream.precision.out_dtype
            device = resolve_device(self.device)  # a fallback warns once per pass
            for batch in stream:
                X = to_tensor(batch[0], dtype, device)
                rest = tuple(
                    None if a is None else to_tensor(a, "float32", device) for a in batch[1:]
                )
                yield (X, *rest)
            self.stats = stream.stats

    # made at run time, but found by name like any class: a DataLoader that spawns its
    # workers (macOS, Windows; forkserver) pickles the dataset, and unpickling looks the
    # class up as ``fastprep.runtime.torch_batches.BatchDataset`` (this module's getattr)
    BatchDataset.__module__, BatchDataset.__qualname__ = __name__, "BatchDataset"
    return BatchDataset


def _fork_safe(source: Any, columns: list[str]) -> Any:
    """``source`` as a DataLoader's worker processes can read it: a Polars DataFrame or
    LazyFrame (and a filtered Dataset) as an Arrow table of ``columns``, made now in this
    process. Polars' thread pool does not survive ``fork`` (a worker that calls Polars
    waits for ever on a lock copied mid-use), and a query would otherwise run once in
    every worker. The table is held while the dataset lives; files, pandas, Arrow tables
    and unfiltered Datasets are read by each pass as they are."""
    if source_kind(source) == "polars":
        source = source.lazy()  # selected and exported by the one collect below
    return collect_once(source, columns)


_CLASSES: dict[str, type] = {}


def __getattr__(name: str) -> Any:
    if name == "BatchDataset":
        if name not in _CLASSES:
            _CLASSES[name] = _make_dataset_class()
        return _CLASSES[name]
    raise AttributeError(name)
