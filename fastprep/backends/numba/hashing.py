"""Feature hashing straight to CSR, bit-identical to sklearn's FeatureHasher.

Row ``i`` is hashed like ``FeatureHasher(input_type="dict")`` applied to the
dict ``{name: value}`` over ``columns`` (missing values omitted) followed by one
``"a=x^b=y"`` token (value 1) per cross.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fastprep.backends.numba import hash_csr
from fastprep.backends.numba.hash_csr import DIRECT, GATHERED, NUMBER
from fastprep.data import text_encode
from fastprep.data.columns import TextColumn
from fastprep.emit.csr import CsrArrays
from fastprep.native import threads
from fastprep.native.arena import ARENA

if TYPE_CHECKING:
    import scipy.sparse

__all__ = ["hash_columns"]

_MAX_FEATURES = 2**31 - 1
_INT32_MAX = 2**31 - 1
#: a cross's table holds every combination of its members' values (no pass over the rows
#: to find those present) when there are at most this many or a 16th of the rows
_HASH_ALL_COMBINATIONS = 1 << 16
_TASK = 16384  # rows per parallel task
_NO_BITMAP = np.frombuffer(b"\xff", dtype=np.uint8)


def _to_arrow(name: str, values: Any):
    """Return ``("str", ChunkedArray[large_string|dictionary] | TextColumn)``,
    ``("num", float64 ndarray with NaN for missing)`` or ``("null", None)``. A
    ``TextColumn`` (codes + distinct values, as validation encoded it) is kept as is."""
    import pyarrow as pa

    if isinstance(values, TextColumn):
        return ("str", values) if values.n_unique else ("null", None)

    if isinstance(values, np.ndarray) and values.dtype.kind in "biuf":
        return "num", np.asarray(values, dtype=np.float64).ravel()
    if isinstance(values, np.ndarray) and values.dtype.kind == "S":
        raise TypeError(f"column {name!r}: bytes values are not supported")
    mod = type(values).__module__ or ""
    if mod.startswith("pandas"):
        import pandas as pd

        dt = values.dtype
        if (
            not isinstance(dt, pd.CategoricalDtype)
            and not pd.api.types.is_object_dtype(dt)
            and (pd.api.types.is_numeric_dtype(dt) or pd.api.types.is_bool_dtype(dt))
        ):
            return "num", np.asarray(
                values.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64
            )
    if not isinstance(values, (pa.Array, pa.ChunkedArray)):
        try:
            values = pa.array(values, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise TypeError(f"column {name!r}: mixed or unsupported values") from exc
    arr = values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values])
    t = arr.type
    if pa.types.is_dictionary(t):
        vt = t.value_type
        if pa.types.is_string(vt) or pa.types.is_large_string(vt):
            return "str", arr
        arr = arr.cast(vt)
        t = vt
    if pa.types.is_null(t):
        return "null", None
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        if not pa.types.is_large_string(t):
            arr = arr.cast(pa.large_string())
        return "str", arr
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        out = arr.cast(pa.float64(), safe=False).to_numpy()
        return "num", np.asarray(out, dtype=np.float64)
    raise TypeError(f"column {name!r}: unsupported type {t}")


def _buffers(chunk):
    """(uint8 data, int64 offsets, uint8 validity bitmap, bit offset or -1)."""
    n = len(chunk)
    bufs = chunk.buffers()
    # All read-only so numba compiles one signature.
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[chunk.offset : chunk.offset + n + 1]
    data = np.frombuffer(bufs[2] if bufs[2] is not None else b"\0", dtype=np.uint8)
    bitmap, boff = _NO_BITMAP, -1
    if chunk.null_count and bufs[0] is not None:
        bitmap, boff = np.frombuffer(bufs[0], dtype=np.uint8), chunk.offset
    for a in (data, offsets, bitmap):
        a.flags.writeable = False  # frombuffer of a mutable buffer is writable
    return data, offsets, bitmap, boff


def _separators(names: Sequence[str]):
    parts = [names[0] + "="] + ["^" + nm + "=" for nm in names[1:]]
    enc = [p.encode("utf-8") for p in parts] + [b""] * (3 - len(parts))
    off = np.zeros(4, dtype=np.int64)
    off[1:] = np.cumsum([len(e) for e in enc])
    sep = np.frombuffer(b"".join(enc) or b"\0", dtype=np.uint8)
    return sep, off


class _Strings:
    """The string features of one call, each either hashed per row into a row of
    ``s_code`` (packed codes) or gathered by dictionary code from a table in ``gtab``.

    Each distinct source column (by its Arrow buffers: ``dest`` used alone and in a cross
    is one source) is dictionary-encoded at most once per call, into a row of ``ccodes``."""

    def __init__(self, mm, features, fm, n_rows: int) -> None:
        self.mm, self.fm, self.n = mm, fm, n_rows
        keys: dict[tuple, int] = {}
        self.arrays: list = []
        self.members = []
        for _names, arrays in features:
            idx = []
            for arr in arrays:
                key = _source_key(arr)
                if key not in keys:
                    keys[key] = len(self.arrays)
                    self.arrays.append(arr)
                idx.append(keys[key])
            self.members.append(idx)
        self.ccodes = ARENA.empty((len(self.arrays), n_rows), np.int32)
        self.uniques: dict[int, Any] = {}  # source -> distinct values, None: not encoded
        direct = [f for f, (names, arrays) in enumerate(features) if not self._gatherable(f)]
        self.s_code = ARENA.empty((len(direct), n_rows), np.uint32)
        self.kinds: list[tuple[int, int] | None] = [None] * len(features)
        for p, f in enumerate(direct):
            names, arrays = features[f]
            arrays = [_as_arrow(a) for a in arrays]
            _run_hash(mm, *_separators(names), arrays, fm, self.s_code[p])
            self.kinds[f] = (DIRECT, p)
        self.gsrc = np.full((len(features), 3), -1, dtype=np.int64)
        self.gmul = np.ones((len(features), 3), dtype=np.int64)
        self.goff = np.zeros(len(features), dtype=np.int64)
        tables: list[np.ndarray] = []
        at = 0
        for f, (names, _arrays) in enumerate(features):
            if self.kinds[f] is not None:
                continue
            table = self._table(f, names)
            if table is None:  # a member with no values at all: never fires
                continue
            g = len(tables)
            srcs = self.members[f]
            self.gsrc[g, : len(srcs)] = srcs
            self.gmul[g, : len(srcs)] = [len(self.uniques[s]) for s in srcs]
            self.goff[g] = at
            at += len(table)
            tables.append(table)
            self.kinds[f] = (GATHERED, g)
        self.gtab = np.concatenate(tables) if tables else np.zeros(1, np.uint32)
        self.gsrc, self.gmul = self.gsrc[: len(tables)].copy(), self.gmul[: len(tables)].copy()
        self.goff = self.goff[: len(tables)].copy()

    def _encoded(self, s: int) -> bool:
        """Encode source ``s`` (once); False if it has too many distinct values."""
        import pyarrow as pa

        from fastprep.backends.numba import hash_codes

        if s not in self.uniques:
            arr = self.arrays[s]
            if isinstance(arr, TextColumn):  # encoded already: its codes and values
                self.ccodes[s] = arr.codes
                self.uniques[s] = text_encode.arrow_uniques(arr).cast(pa.large_string())
            elif pa.types.is_dictionary(arr.type):
                codes, uniques = hash_codes.codes_and_uniques(arr)
                self.ccodes[s] = codes
                self.uniques[s] = uniques
            else:  # gives up early on mostly distinct values (row IDs): hashing is cheaper
                done = text_encode.try_encode(arr, out=self.ccodes[s])
                self.uniques[s] = None if done is None else done[1]
        return self.uniques[s] is not None

    def _gatherable(self, f: int) -> bool:
        from fastprep.backends.numba import hash_codes

        srcs = self.members[f]
        if not all(self._encoded(s) for s in srcs):
            return False
        return len(srcs) == 1 or hash_codes.combinable([len(self.uniques[s]) for s in srcs], self.n)

    def _table(self, f: int, names):
        """Packed codes by combined dictionary code (``MISSING`` for absent
        combinations), or None when a member has no values."""
        import pyarrow as pa

        from fastprep.backends.numba import hash_codes

        srcs = self.members[f]
        cards = [len(self.uniques[s]) for s in srcs]
        product = int(np.prod(np.array(cards, dtype=np.int64)))
        if product == 0:
            return None
        if product <= max(_HASH_ALL_COMBINATIONS, self.n // 16):
            combos = np.arange(product, dtype=np.int64)  # cheaper than finding those present
        else:
            combos = hash_codes.present(self.ccodes, np.array(srcs, np.int64), cards)
        values = hash_codes.member_values(combos, [self.uniques[s] for s in srcs], cards)
        hashed = np.empty(len(combos), np.uint32)
        _run_hash(self.mm, *_separators(names), [pa.chunked_array([v]) for v in values],
                  self.fm, hashed)  # fmt: skip
        if len(combos) == product:
            return hashed
        table = np.full(product, self.mm.MISSING, dtype=np.uint32)
        table[combos] = hashed
        return table


def _as_arrow(arr: Any) -> Any:
    """A ``TextColumn`` as an Arrow dictionary array (for hashing each row's bytes)."""
    if not isinstance(arr, TextColumn):
        return arr
    import pyarrow as pa

    indices = pa.array(arr.codes, mask=arr.codes < 0, type=pa.int32())
    uniques = text_encode.arrow_uniques(arr)
    return pa.chunked_array([pa.DictionaryArray.from_arrays(indices, uniques)])


def _source_key(arr) -> tuple:
    """Identifies a column by its chunks' buffers (alive for the call), type and slices;
    a ``TextColumn`` by its codes array."""
    if isinstance(arr, TextColumn):
        return ("text", id(arr.codes))

    def buffers(chunk) -> tuple:
        return tuple(0 if b is None else b.address for b in chunk.buffers())

    parts: list = [str(arr.type)]
    for c in arr.chunks:
        dic = buffers(c.dictionary) if hasattr(c, "dictionary") else ()
        parts.append((buffers(c), dic, c.offset, len(c)))
    return tuple(parts)


def _run_hash(mm, sep, sep_off, arrays, fm, out) -> None:
    """Split rows at the union of the members' chunk boundaries (zero-copy slices) into
    segments, and each segment into one piece per thread; one kernel call per piece."""
    import numba
    import pyarrow as pa

    n = len(out)
    arrays = [
        a.cast(a.type.value_type).cast(pa.large_string()) if pa.types.is_dictionary(a.type) else a
        for a in arrays
    ]
    bounds = sorted(
        {0, n} | {int(b) for a in arrays for b in np.cumsum([len(c) for c in a.chunks])}
    )
    workers = max(1, numba.get_num_threads())
    calls = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        if hi <= lo:
            continue
        members: list = []
        for a in arrays:
            piece = a.slice(lo, hi - lo)
            chunk = piece.chunks[0] if piece.num_chunks == 1 else piece.combine_chunks()
            members.extend(_buffers(chunk))
        while len(members) < 12:
            members.extend(members[:4])
        parts = 1 if hi - lo < _TASK else workers
        cuts = np.linspace(lo, hi, parts + 1).astype(np.int64).tolist()
        for a, b in zip(cuts[:-1], cuts[1:]):
            if b > a:
                calls.append((sep, sep_off, len(arrays), *members, lo, a, b, fm, out))
    if workers == 1 or n < _TASK:
        for args in calls:
            mm.hash_rows(*args)
        return
    threads.map_all(lambda args: mm.hash_rows(*args), calls)  # the kernel releases the GIL


def hash_columns(
    columns: Sequence[tuple[str, Any]],
    n_features: int,
    *,
    alternate_sign: bool = True,
    crosses: Sequence[Sequence[tuple[str, Any]]] = (),
    dtype: Any = np.float32,
) -> scipy.sparse.csr_matrix:
    """:func:`hash_column_arrays` as a ``scipy.sparse.csr_matrix`` (over the same arrays)."""
    matrix = hash_column_arrays(
        columns, n_features, alternate_sign=alternate_sign, crosses=crosses, dtype=dtype
    ).to_scipy()
    matrix.has_canonical_format = True
    return matrix


def hash_column_arrays(
    columns: Sequence[tuple[str, Any]],
    n_features: int,
    *,
    alternate_sign: bool = True,
    crosses: Sequence[Sequence[tuple[str, Any]]] = (),
    dtype: Any = np.float32,
) -> CsrArrays:
    """Hash columns (and column crosses) into a CSR matrix (its arrays: no scipy needed).

    Bit-identical to ``FeatureHasher(n_features, input_type="dict",
    alternate_sign=alternate_sign, dtype=dtype)`` on per-row dicts
    ``{name: value, ..., "a=x^b=y": 1, ...}``: a string value gives token
    ``"name=value"`` (value 1), a numeric value gives token ``name`` with that
    value; missing values (None/NaN/NA) and numeric zeros contribute nothing.
    Each cross of 2-3 string columns gives one token per row, or nothing if a
    member is missing.  Indices are sorted and duplicates summed per row.
    """
    from fastprep.backends.numba import murmur as mm

    if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)):
        raise TypeError(f"n_features must be an int, got {type(n_features).__name__}")
    if not 1 <= int(n_features) <= _MAX_FEATURES:
        raise ValueError(f"n_features must be in [1, {_MAX_FEATURES}], got {n_features}")
    n_features = int(n_features)
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64, got {dtype}")

    names = [nm for nm, _ in columns]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate column names in {names}")
    n_rows = None
    for nm, vals in [c for c in columns] + [m for cr in crosses for m in cr]:
        if not isinstance(nm, str):
            raise TypeError(f"column names must be str, got {nm!r}")
        n = len(vals)
        if n_rows is None:
            n_rows = n
        elif n != n_rows:
            raise ValueError(f"column {nm!r} has length {n}, expected {n_rows}")
    n_rows = n_rows or 0

    # Feature list in dict order: columns, then crosses.
    str_feats, num_feats, kinds = [], [], []
    for nm, vals in columns:
        kind, conv = _to_arrow(nm, vals)
        if kind == "str":
            kinds.append((0, len(str_feats)))
            str_feats.append(([nm], [conv]))
        elif kind == "num":
            kinds.append((1, len(num_feats)))
            num_feats.append((nm, conv))
    for cr in crosses:
        if not 2 <= len(cr) <= 3:
            raise ValueError(f"a cross needs 2 or 3 columns, got {len(cr)}")
        convs = [_to_arrow(nm, vals) for nm, vals in cr]
        for (nm, _), (kind, _c) in zip(cr, convs):
            if kind == "num":
                raise TypeError(f"cross member {nm!r} must be string-like")
        if any(kind == "null" for kind, _ in convs):
            continue  # an all-missing member: the cross never fires
        kinds.append((0, len(str_feats)))
        str_feats.append(([nm for nm, _ in cr], [c for _, c in convs]))

    fm_m, imin_idx = mm.fastmod_params(n_features)
    fm = np.array([np.int64(fm_m.view(np.int64)), n_features, imin_idx, int(bool(alternate_sign))])
    # Large per-call arrays come from the arena (retained pages: fresh ones fault at
    # ~0.3 GiB/s on the VMs measured).
    strings = _Strings(mm, str_feats, fm, n_rows)
    num_vals = ARENA.empty((len(num_feats), n_rows), np.float64)
    num_code = np.empty(len(num_feats), dtype=np.int64)
    for p, (nm, vals) in enumerate(num_feats):
        num_vals[p] = vals
        h = int(mm.murmur3_32(np.array(list(nm.encode("utf-8")), dtype=np.uint8)))
        idx = int(imin_idx) if h == -(2**31) else abs(h) % n_features
        num_code[p] = idx * 2 + int(bool(alternate_sign) and h < 0)

    order = [strings.kinds[p] if k == 0 else (NUMBER, p) for k, p in kinds]
    order = [k for k in order if k is not None]
    kind_arr = np.array([k for k, _ in order], dtype=np.int8)
    pos_arr = np.array([p for _, p in order], dtype=np.int64)
    parts = (kind_arr, pos_arr, strings.s_code, num_code, num_vals, strings.ccodes,
             strings.gsrc, strings.gmul, strings.goff, strings.gtab)  # fmt: skip
    counts = ARENA.empty(n_rows, np.int32)
    # sign-only features: the first pass keeps each row's sorted codes for the second
    sign_only = len(order) > 0 and NUMBER not in kind_arr
    packed = ARENA.empty((n_rows, len(order)), np.uint32) if sign_only else None
    if n_rows and packed is not None:
        hash_csr.sort_rows(*parts, counts, packed)
    elif n_rows:
        hash_csr.count_rows(*parts, counts)
    # int32 indptr straight away when it cannot overflow (sklearn: int32 iff nnz fits)
    wide = n_rows * len(order) > _INT32_MAX
    indptr = ARENA.empty(n_rows + 1, np.int64 if wide else np.int32)
    indptr[0] = 0
    np.cumsum(counts, out=indptr[1:], dtype=indptr.dtype)
    nnz = int(indptr[-1])
    idx_dtype = np.int32 if nnz <= _INT32_MAX else np.int64
    indices = ARENA.empty(nnz, idx_dtype)
    data = ARENA.empty(nnz, dtype)
    if nnz and packed is not None:
        hash_csr.fill_sorted(*parts, packed, indptr, indices, data)
    elif nnz:
        hash_csr.fill_rows(*parts, indptr, indices, data)
    return CsrArrays(data, indices, indptr.astype(idx_dtype, copy=False), (n_rows, n_features))
