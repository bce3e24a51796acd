"""The interface every backend implements, and the one way a backend finds its code for
an operation.

A backend is a module named in :mod:`fastprep.backends.registry` whose functions satisfy
:class:`Backend`: ``fit_stage`` learns the parameters of a stage's features, ``run_stage``
writes their output columns into the sink. Inside, a backend never asks ``isinstance``
of a step: it looks the step's type up in its one :class:`Dispatch` table, whose entry
holds what that backend does for the step (fit it, apply it element-wise, encode with it,
generate kernel code for it...). A type missing from the table, or an entry without the
asked feature, raises :class:`UnsupportedOperation` naming the backend, the operation and
the feature: nothing is skipped silently.

Adding a step
-------------
1. The frozen step class in ``fastprep/plan/steps.py``.
2. The reference backend (``backends/reference/backend.py``, table ``REFERENCE``): one
   ``ReferenceOp`` entry with ``fit`` (what it learns; ``no_fit`` when nothing) and
   ``apply`` (an element-wise or fitted step) or ``encode`` (an encoder: its output block);
   a fitted step also ``partial`` (what each partition of a streamed or cluster fit
   computes) and, for ``"moments"``, ``from_moments``. Every other backend must give the
   same X as this one.
3. The Numba backend (``backends/numba/ops.py``, table ``NUMBA``): one ``NumbaOp`` entry.
   ``NumbaOp.reference()`` runs the step by the reference code (what an encoder or a
   step without a kernel does); a fusable step also gives ``code`` (its lines in the fused
   kernel), ``stat`` (the statistic a fit round computes, or ``"values"``) and ``params``
   (usually the reference's ``from_moments``).
4. The numexpr backend runs the reference table for everything but element-wise
   expressions: nothing to add.

The conformance suite (``tests/backends/test_conformance.py``) then runs the step on
every backend; a backend without an entry fails there with ``UnsupportedOperation``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from fastprep.errors import BackendError

if TYPE_CHECKING:
    from fastprep.data.columns import Table
    from fastprep.emit.sink import OutputSink
    from fastprep.plan.nodes import LogicalPlan, Stage

#: fitted parameters of one feature: per input name, one dict per step
FeatureParams = dict[str, list[dict[str, Any]]]


class UnsupportedOperation(BackendError):
    """A backend has no implementation of ``feature`` (fit, apply, encode, kernel code...)
    for the operation ``op``."""

    def __init__(self, backend: str, op: str, feature: str) -> None:
        self.backend, self.op, self.feature = backend, op, feature
        super().__init__(
            f"backend {backend!r} does not implement {feature} for {op}; "
            f"run this feature on another backend (e.g. backend='pandas')"
        )


@runtime_checkable
class Backend(Protocol):
    """What :func:`fastprep.backends.registry.load_backend` returns."""

    def fit_stage(
        self, plan: LogicalPlan, stage: Stage, table: Table, log: Any = None
    ) -> dict[int, FeatureParams]:
        """Per feature index of ``stage``: its fitted parameters."""
        ...

    def run_stage(
        self,
        plan: LogicalPlan,
        stage: Stage,
        params: list[FeatureParams],
        table: Table,
        sink: OutputSink,
        log: Any,
    ) -> set[int]:
        """Write the stage's features into ``sink``; returns those already checked finite."""
        ...


Op = TypeVar("Op")


class Dispatch(Generic[Op]):
    """A backend's table: step (or node) type -> its entry for that type.

    Lookup is by exact type, then by the type's bases (a subclass shares its parent's
    entry unless it has its own). ``entry(step, feature)`` returns the entry's attribute
    ``feature``, raising :class:`UnsupportedOperation` when the type or the attribute is
    missing (an attribute set to ``None`` counts as missing).
    """

    def __init__(self, backend: str, table: Mapping[type, Op]) -> None:
        self.backend = backend
        self.table: dict[type, Op] = dict(table)

    def __contains__(self, kind: type) -> bool:
        return self._find(kind) is not None

    def _find(self, kind: type) -> Op | None:
        for base in kind.__mro__:
            if base in self.table:
                return self.table[base]
        return None

    def op(self, node: Any, feature: str = "any operation") -> Op:
        """The entry for ``node``'s type."""
        found = self._find(type(node))
        if found is None:
            raise UnsupportedOperation(self.backend, _describe(node), feature)
        return found

    def entry(self, node: Any, feature: str) -> Any:
        """The entry's ``feature`` (a function, a flag...) for ``node``'s type."""
        value = getattr(self.op(node, feature), feature, None)
        if value is None:
            raise UnsupportedOperation(self.backend, _describe(node), feature)
        return value

    def has(self, node: Any, feature: str) -> bool:
        found = self._find(type(node))
        return found is not None and getattr(found, feature, None) is not None


def _describe(node: Any) -> str:
    describe = getattr(node, "describe", None)
    return describe() if callable(describe) else type(node).__name__
