"""Where each feature's columns go in X, and their names — the same for every backend."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastprep.emit.names import FeatureNames, HashedNames
from fastprep.plan.nodes import Feature, LogicalPlan
from fastprep.plan.steps import SUFFIXED_ENCODERS, Bin, Categorify, Hash, OneHot, Vectorize

#: above this many categories in one input, ``OneHot(sparse=None)`` emits CSR
SPARSE_ONEHOT_MIN_CATEGORIES = 64
MISSING_LABEL = "<missing>"
INFREQUENT_LABEL = "<infrequent>"


@dataclass(frozen=True)
class FeatureSlot:
    """One feature's place in X: ``kind`` is "numeric", "onehot" or "hash".

    ``Categorify`` features are "numeric": one dense column per input, named by the input;
    so are ``TargetEncode``/``CountEncode``, named ``<input>:target`` / ``<input>:count``."""

    kind: str
    offset: int
    width: int
    sparse: bool
    prefix: str = ""


@dataclass(frozen=True)
class Layout:
    slots: tuple[FeatureSlot, ...]
    width: int
    sparse: bool

    def names(self, plan: LogicalPlan, params: list[dict[str, Any]]) -> FeatureNames:
        """One name per column of X; hashed blocks' names are generated on demand."""
        parts: list[Sequence[str]] = []
        for feature, slot, fitted in zip(plan.features, self.slots, params):
            if slot.kind == "numeric":
                suffix = getattr(feature.encoder, "output_suffix", "")  # ``<col>:target``
                parts.append([i.name + suffix for i in feature.inputs])
            elif slot.kind == "onehot" and isinstance(feature.encoder, Bin):
                for item in feature.inputs:
                    parts.append(bin_names(item.name, fitted[item.name][-1]))
            elif slot.kind == "onehot":
                for item in feature.inputs:
                    parts.append(category_names(item.name, fitted[item.name][-1]))
            elif slot.kind == "vocab":  # "col:" + DictVectorizer's feature name
                name = feature.inputs[0].name
                parts.append([f"{name}:{v}" for v in fitted[name][-1]["vocabulary"]])
            else:
                parts.append(HashedNames(slot.prefix, slot.width))
        return FeatureNames(parts)


def make_layout(plan: LogicalPlan, params: list[dict[str, Any]]) -> Layout:
    slots: list[FeatureSlot] = []
    offset = 0
    for feature, fitted in zip(plan.features, params, strict=True):
        slot = _slot(feature, fitted, offset)
        slots.append(slot)
        offset += slot.width
    return Layout(tuple(slots), offset, any(s.sparse for s in slots))


def _slot(feature: Feature, fitted: dict[str, Any], offset: int) -> FeatureSlot:
    encoder = feature.encoder
    if encoder is None or isinstance(encoder, (Categorify, *SUFFIXED_ENCODERS)):
        return FeatureSlot("numeric", offset, len(feature.inputs), False)
    if isinstance(encoder, OneHot):
        widths = [category_count(fitted[i.name][-1]) for i in feature.inputs]
        sparse = encoder.sparse
        if sparse is None:
            sparse = max(widths, default=0) > SPARSE_ONEHOT_MIN_CATEGORIES
        return FeatureSlot("onehot", offset, sum(widths), sparse)
    if isinstance(encoder, Bin):  # one column per fitted bin, always CSR
        widths = [len(fitted[i.name][-1]["edges"]) - 1 for i in feature.inputs]
        return FeatureSlot("onehot", offset, sum(widths), True)
    if isinstance(encoder, Vectorize):
        width = len(fitted[feature.inputs[0].name][-1]["vocabulary"])
        return FeatureSlot("vocab", offset, width, True, f"{feature.inputs[0].name}:")
    assert isinstance(encoder, Hash)
    return FeatureSlot("hash", offset, encoder.n_features, True, hash_prefix(feature))


def category_count(fitted: dict[str, Any]) -> int:
    """Kept categories, then ``<missing>`` if seen at fit, then ``<infrequent>`` if any."""
    extra = (1 if fitted["missing"] else 0) + (1 if fitted.get("infrequent", 0) else 0)
    return len(fitted["categories"]) + extra


def category_names(name: str, fitted: dict[str, Any]) -> list[str]:
    labels = [_label(c) for c in fitted["categories"]]
    if fitted["missing"]:
        labels.append(MISSING_LABEL)
    if fitted.get("infrequent", 0):
        labels.append(INFREQUENT_LABEL)
    return [f"{name}={label}" for label in labels]


def bin_names(name: str, fitted: dict[str, Any]) -> list[str]:
    """``col=bin0``, ``col=bin1``, ... for a ``Bin(encode="onehot")`` input."""
    return [f"{name}=bin{i}" for i in range(len(fitted["edges"]) - 1)]


def hash_prefix(feature: Feature) -> str:
    return "hash:" + ("^" if feature.cross else ",").join(i.name for i in feature.inputs)


def _label(value: float | str) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
