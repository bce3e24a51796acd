"""Feature hashing straight to CSR, bit-identical to sklearn's FeatureHasher.

Row ``i`` is hashed like ``FeatureHasher(input_type="dict")`` applied to the
dict ``{name: value}`` over ``columns`` (missing values omitted) followed by one
``"a=x^b=y"`` token (value 1) per cross.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fastprep.emit.arena import ARENA

if TYPE_CHECKING:
    import scipy.sparse

__all__ = ["hash_columns"]

_MAX_FEATURES = 2**31 - 1
_INT32_MAX = 2**31 - 1
# Dictionary path: only for long strings with few distinct values (murmur over
# short strings is cheaper than arrow's dictionary hash table).
_DICT_MIN_MEAN_BYTES = 24
_DICT_MAX_DISTINCT_RATIO = 0.2
_SAMPLE = 4096
_TASK = 16384  # rows per parallel task
_POOL = None
_POOL_SIZE = 0
_NO_BITMAP = np.frombuffer(b"\xff", dtype=np.uint8)


def _to_arrow(name: str, values: Any):
    """Return ``("str", ChunkedArray[large_string|dictionary])``,
    ``("num", float64 ndarray with NaN for missing)`` or ``("null", None)``."""
    import pyarrow as pa

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


def _use_dictionary(arr) -> bool:
    """Cheap estimate: long strings with few distinct values -> dictionary path."""
    import pyarrow.compute as pc

    n = len(arr)
    if n < 4 * _SAMPLE:
        return False
    total = 0
    for c in arr.chunks:
        if len(c):
            off = np.frombuffer(c.buffers()[1], dtype=np.int64)
            total += int(off[c.offset + len(c)] - off[c.offset])
    if total < _DICT_MIN_MEAN_BYTES * n:
        return False
    sample = arr.take(np.linspace(0, n - 1, _SAMPLE).astype(np.int64))
    return len(pc.unique(sample)) <= _DICT_MAX_DISTINCT_RATIO * _SAMPLE


def _hash_string_feature(mm, names, arrays, fm, out) -> None:
    """Hash one (possibly crossed) string feature into packed codes ``out``."""
    import pyarrow as pa

    from . import hash_codes

    sep, sep_off = _separators(names)
    if len(arrays) > 1:
        if not _hash_cross_by_codes(mm, sep, sep_off, arrays, fm, out):
            _run_hash(mm, sep, sep_off, arrays, fm, out)
        return
    arr = arrays[0]
    if not (pa.types.is_dictionary(arr.type) or _use_dictionary(arr)):
        _run_hash(mm, sep, sep_off, arrays, fm, out)
        return
    # Dictionary path: hash each distinct value once, then gather by code.
    codes, dic = hash_codes.codes_and_uniques(arr)
    if len(dic) == 0:
        out[:] = mm.MISSING
        return
    table = ARENA.empty(len(dic), np.uint32)
    _run_hash(mm, sep, sep_off, [pa.chunked_array([dic])], fm, table)
    hash_codes.gather_combined(table, codes, out, np.uint32(mm.MISSING))


def _hash_cross_by_codes(mm, sep, sep_off, arrays, fm, out) -> bool:
    """Hash a cross once per combination of member values present, then gather per row.

    False (nothing written) when a member looks high-cardinality (a sample of mostly
    distinct values) or the combinations would not fit a table: then each row is hashed."""
    import pyarrow as pa

    from . import hash_codes

    n = len(out)
    for arr in arrays:
        if not pa.types.is_dictionary(arr.type) and n >= 4 * _SAMPLE and _mostly_distinct(arr):
            return False
    coded = [hash_codes.codes_and_uniques(arr) for arr in arrays]
    cards = [len(uniques) for _, uniques in coded]
    if not hash_codes.combinable(cards, n):
        return False
    if min(cards) == 0:
        out[:] = mm.MISSING
        return True
    product = int(np.prod(np.array(cards, dtype=np.int64)))
    combined, combos = hash_codes.combined_and_present([codes for codes, _ in coded], cards)
    members = hash_codes.member_values(combos, [uniques for _, uniques in coded], cards)
    hashed = ARENA.empty(len(combos), np.uint32)
    _run_hash(mm, sep, sep_off, [pa.chunked_array([m]) for m in members], fm, hashed)
    table = ARENA.empty(product, np.uint32)
    table.fill(mm.MISSING)
    table[combos] = hashed
    hash_codes.gather_combined(table, combined, out, np.uint32(mm.MISSING))
    return True


def _mostly_distinct(arr) -> bool:
    """A sample of the column is more than half distinct values (e.g. row IDs)."""
    import pyarrow.compute as pc

    sample = arr.take(np.linspace(0, len(arr) - 1, _SAMPLE).astype(np.int64))
    return len(pc.unique(sample)) > _SAMPLE // 2


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
    pool = _pool(workers)
    for f in [pool.submit(mm.hash_rows, *args) for args in calls]:
        f.result()


def _pool(workers: int):
    """A lazily created, reused thread pool (the kernel releases the GIL)."""
    global _POOL, _POOL_SIZE
    if _POOL is None or workers > _POOL_SIZE:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(workers, thread_name_prefix="fastprep-hash")
        _POOL_SIZE = workers
    return _POOL


def hash_columns(
    columns: Sequence[tuple[str, Any]],
    n_features: int,
    *,
    alternate_sign: bool = True,
    crosses: Sequence[Sequence[tuple[str, Any]]] = (),
    dtype: Any = np.float32,
) -> scipy.sparse.csr_matrix:
    """Hash columns (and column crosses) into a ``scipy.sparse.csr_matrix``.

    Bit-identical to ``FeatureHasher(n_features, input_type="dict",
    alternate_sign=alternate_sign, dtype=dtype)`` on per-row dicts
    ``{name: value, ..., "a=x^b=y": 1, ...}``: a string value gives token
    ``"name=value"`` (value 1), a numeric value gives token ``name`` with that
    value; missing values (None/NaN/NA) and numeric zeros contribute nothing.
    Each cross of 2-3 string columns gives one token per row, or nothing if a
    member is missing.  Indices are sorted and duplicates summed per row.
    """
    import scipy.sparse as sp

    from . import _murmur as mm

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
    # Per string feature and row: ``index * 2 + negative`` or ``mm.MISSING``. Large
    # per-run arrays come from the arena (retained pages: fresh ones fault at ~0.3 GiB/s).
    s_code = ARENA.empty((len(str_feats), n_rows), np.uint32)
    for p, (nms, arrs) in enumerate(str_feats):
        if n_rows:
            _hash_string_feature(mm, nms, arrs, fm, s_code[p])
    num_vals = ARENA.empty((len(num_feats), n_rows), np.float64)
    num_code = np.empty(len(num_feats), dtype=np.int64)
    for p, (nm, vals) in enumerate(num_feats):
        num_vals[p] = vals
        h = int(mm.murmur3_32(np.array(list(nm.encode("utf-8")), dtype=np.uint8)))
        idx = int(imin_idx) if h == -(2**31) else abs(h) % n_features
        num_code[p] = idx * 2 + int(bool(alternate_sign) and h < 0)

    kind_arr = np.array([k for k, _ in kinds], dtype=np.int8)
    pos_arr = np.array([p for _, p in kinds], dtype=np.int64)
    counts = ARENA.empty(n_rows, np.int32)
    if n_rows:
        mm.count_nnz(s_code, num_vals, counts)
    # int32 indptr straight away when it cannot overflow (sklearn: int32 iff nnz fits)
    wide = n_rows * len(kinds) > _INT32_MAX
    indptr = ARENA.empty(n_rows + 1, np.int64 if wide else np.int32)
    indptr[0] = 0
    np.cumsum(counts, out=indptr[1:], dtype=indptr.dtype)
    nnz = int(indptr[-1])
    idx_dtype = np.int32 if nnz <= _INT32_MAX else np.int64
    indices = ARENA.empty(nnz, idx_dtype)
    data = ARENA.empty(nnz, dtype)
    removed = ARENA.zeros(n_rows, np.int32)  # only rows with duplicates write it
    if n_rows and len(kinds):
        mm.fill_rows(s_code, num_code, num_vals, kind_arr, pos_arr, indptr, indices, data, removed)
    n_removed = int(removed.sum())
    if n_removed:
        new_indptr = ARENA.empty(n_rows + 1, indptr.dtype)
        new_indptr[0] = 0
        np.cumsum(np.diff(indptr) - removed, out=new_indptr[1:], dtype=indptr.dtype)
        new_indices = ARENA.empty(nnz - n_removed, idx_dtype)
        new_data = ARENA.empty(nnz - n_removed, dtype)
        mm.compact(indptr, indices, data, new_indptr, new_indices, new_data)
        indptr, indices, data = new_indptr, new_indices, new_data
    out = sp.csr_matrix(
        (data, indices, indptr.astype(idx_dtype, copy=False)),
        shape=(n_rows, n_features),
        copy=False,
    )
    out.has_sorted_indices = True
    out.has_canonical_format = True
    return out
