"""Generate the source of fused Numba kernels from plan nodes (our own trees, never user text).

A fused stage becomes:

- one *transform* kernel: for each row, read every input column once, compute each
  distinct sub-expression once (CSE by node equality), run each output's step chain in
  registers and write the float32/float64 result straight into its column of X;
- one *fit round* kernel per level of fitted steps: it computes each chain up to its next
  fitted step and folds the values into block statistics (or a median buffer).

Fitted values (means, scales, fills, clip bounds) are read from a parameter array, so the
generated code depends only on the plan's structure: refitting reuses the compiled kernel.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

from fastprep.backends.numba.ops import NUMBA, log1p_code
from fastprep.backends.reference.datetime_parts import PART_CODES
from fastprep.native.kernel_files import indent, source_key
from fastprep.plan.expr import (
    TEXT_PREDICATES,
    TEXT_UNARY,
    Binary,
    Call,
    Col,
    Const,
    DatePart,
    Expr,
    IsIn,
    Unary,
    Where,
    walk,
)
from fastprep.plan.steps import Step

#: rows per statistics block in fit kernels (a few KiB per chain: stays in cache)
BLOCK = 1024
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_FUNCS = {
    "log": "np.log", "log1p": "np.log1p", "exp": "np.exp", "sqrt": "np.sqrt", "abs": "np.abs",
    "floor": "np.floor", "ceil": "np.ceil", "trunc": "np.trunc", "round": "np.rint",
    "sign": "sign", "log2": "np.log2", "log10": "np.log10", "sin": "np.sin", "cos": "np.cos",
    "tan": "np.tan",
}  # fmt: skip
#: functions of a column computed ahead with numpy's vectorized ufuncs
HOISTABLE = ("log", "log1p", "exp", "sqrt", "log2", "log10", "sin", "cos", "tan")


@dataclass(frozen=True)
class Chain:
    """One output column of a fused stage: an input expression and its steps."""

    feature: int
    position: int
    name: str
    expr: Expr
    plain: bool
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class TextLookup:
    """A number computed from one text column (``origin == 'JFK'``, ``length(lower(s))``),
    compiled to a table of its value per distinct value of ``column``, gathered by code."""

    column: str
    node: Expr


@dataclass
class Program:
    """Kernel source plus how to call it: which arrays, in which order."""

    source: str
    number_columns: list[str]
    code_columns: list[str]
    lookups: list[TextLookup]
    #: (chain index, step index, param key) for every slot of the parameter array
    params: list[tuple[int, int, str]]
    #: chains whose statistics a fit round computes: (chain, step, "moments"|"range"|"median")
    stats: list[tuple[int, int, str]] = field(default_factory=list)
    #: (function, column): computed by numpy's SIMD ufunc before the kernel, read as input
    hoisted: list[tuple[str, str]] = field(default_factory=list)
    #: hoisted columns read through a table of the function's values over the column's
    #: small integer range (``hk[c[r] - hl]``) instead of a full-length array
    tabled: frozenset[str] = frozenset()
    #: (column, zone) of date parts: the zone's offset table is passed as two arrays
    zones: list[tuple[str, str | None]] = field(default_factory=list)
    #: numbers from text of several columns (``origin + dest == 'JFKLAX'``): computed by
    #: the reference over the table's rows before the kernel, read as ``ev[i]``
    evaluated: list[Expr] = field(default_factory=list)
    #: (chain index, repair rule) counted in slot ``j`` of the kernel's ``rep`` array
    repairs: list[tuple[int, str]] = field(default_factory=list)

    @property
    def key(self) -> str:
        return source_key(self.source)


class _Emitter:
    """Builds the per-row body: expression temporaries shared across all chains."""

    def __init__(self, text_columns: set[str], tabled: frozenset[str] = frozenset()) -> None:
        self.text_columns = text_columns
        self.tabled = tabled
        self.lines: list[str] = []
        self.memo: dict[Expr, str] = {}
        self.number_columns: list[str] = []
        self.code_columns: list[str] = []
        self.lookups: list[TextLookup] = []
        self.params: list[tuple[int, int, str]] = []
        self.hoisted: list[tuple[str, str]] = []
        self.zones: list[tuple[str, str | None]] = []
        self.evaluated: list[Expr] = []
        self.repairs: list[tuple[int, str]] = []
        self.counter = 0

    def count(self, index: int, rule: str, counted: bool) -> str:
        """The statement counting one repair ``rule`` of chain ``index``'s output: a slot
        of ``rep`` per (chain, rule) that occurs, so any step can report its own rule."""
        if not counted:  # a fit round: the transform counts the repairs
            return "pass"
        key = (index, rule)
        if key not in self.repairs:
            self.repairs.append(key)
        return f"rep[{self.repairs.index(key)}] += 1"

    def hoist(self, func: str, column: str) -> str:
        """``func(column)`` precomputed by numpy (SIMD: ~9x faster than a scalar libm call
        per row here, and identical to the reference, which uses the same ufunc)."""
        self.column(column)  # the kernel still reads the column (missing checks)
        key = (func, column)
        if key not in self.hoisted:
            self.hoisted.append(key)
        return f"h{self.hoisted.index(key)}"

    def column(self, name: str) -> str:
        if name not in self.number_columns:
            self.number_columns.append(name)
        return f"x{self.number_columns.index(name)}"

    def code(self, name: str) -> str:
        if name not in self.code_columns:
            self.code_columns.append(name)
        return f"k{self.code_columns.index(name)}"

    def param(self, chain: int, step: int, key: str) -> str:
        slot = (chain, step, key)
        if slot not in self.params:
            self.params.append(slot)
        return f"p{self.params.index(slot)}"

    def expr(self, node: Expr) -> str:
        """A variable holding ``node``'s value for the current row (emitting code once)."""
        if node in self.memo:
            return self.memo[node]
        if isinstance(node, Col):
            var = self.column(node.name)
            self.memo[node] = var
            return var
        if isinstance(node, Const):
            return _literal(node.value)
        lines = self._compute(node, "@V@")  # children first: they take their own names
        var = f"e{self.counter}"
        self.counter += 1
        self.lines.extend(line.replace("@V@", var) for line in lines)
        self.memo[node] = var
        return var

    def _compute(self, node: Expr, var: str) -> list[str]:
        if self._reads_text(node):
            return self._text_lookup(node, var)
        if isinstance(node, Where):
            c, a, b = self.expr(node.cond), self.expr(node.then), self.expr(node.otherwise)
            return [f"{var} = np.nan if {c} != {c} else ({a} if {c} != 0.0 else {b})"]
        if isinstance(node, Unary):
            return self._unary(node, var)
        if isinstance(node, Call):
            return self._call(node, var)
        if isinstance(node, IsIn):
            a = self.expr(node.arg)
            test = " or ".join(f"{a} == {_literal(v)}" for v in node.values)
            yes, no = ("0.0", "1.0") if node.negate else ("1.0", "0.0")
            return [f"{var} = np.nan if {a} != {a} else ({yes} if ({test}) else {no})"]
        if isinstance(node, DatePart):
            return self._date_part(node, var)
        assert isinstance(node, Binary)
        a, b = self.expr(node.left), self.expr(node.right)
        if node.op in _ARITH:
            return [f"{var} = {a} {_ARITH[node.op]} {b}"]
        if node.op == "mod":
            return [f"{var} = np.remainder({a}, {b})"]
        if node.op == "floordiv":
            return [f"{var} = floordiv({a}, {b})"]
        if node.op == "pow":
            # IEEE says nan ** 0 == 1 ** nan == 1: missing must stay missing
            return [f"{var} = np.nan if ({a} != {a} or {b} != {b}) else np.power({a}, {b})"]
        missing = f"{a} != {a} or {b} != {b}"
        if node.op in _COMPARE:
            value = f"(1.0 if {a} {_COMPARE[node.op]} {b} else 0.0)"
        elif node.op == "and":
            value = f"(1.0 if ({a} != 0.0 and {b} != 0.0) else 0.0)"
        else:
            value = f"(1.0 if ({a} != 0.0 or {b} != 0.0) else 0.0)"
        return [f"{var} = np.nan if ({missing}) else {value}"]

    def _unary(self, node: Unary, var: str) -> list[str]:
        if node.op == "isnull":
            arg = node.arg
            if isinstance(arg, Col) and arg.name in self.text_columns:
                return [f"{var} = 1.0 if {self.code(arg.name)} < 0 else 0.0"]
            a = self.expr(arg)
            return [f"{var} = 1.0 if {a} != {a} else 0.0"]
        if (
            node.op in HOISTABLE
            and isinstance(node.arg, Col)
            and node.arg.name not in self.text_columns
        ):
            return [f"{var} = {self.hoist(node.op, node.arg.name)}"]
        a = self.expr(node.arg)
        if node.op == "neg":
            return [f"{var} = -{a}"]
        if node.op == "not":
            return [f"{var} = np.nan if {a} != {a} else (1.0 if {a} == 0.0 else 0.0)"]
        return [f"{var} = {_FUNCS[node.op]}({a})"]

    def _call(self, node: Call, var: str) -> list[str]:
        args = [self.expr(a) for a in node.args]
        if node.fn == "round":
            digits = node.args[1]
            assert isinstance(digits, Const) and isinstance(digits.value, float)
            return [f"{var} = {_round_digits(args[0], int(digits.value))}"]
        if node.fn == "clip":  # numpy's definition: min(max(x, lo), hi)
            x, lo, hi = args
            return [f"{var} = {_maximum(x, lo)}", f"{var} = {_minimum(var, hi)}"]
        pick = _minimum if node.fn == "min" else _maximum
        lines = [f"{var} = {args[0]}"]
        return lines + [f"{var} = {pick(var, a)}" for a in args[1:]]

    def _date_part(self, node: DatePart, var: str) -> list[str]:
        if not isinstance(node.arg, Col):
            return self._evaluated(node, var)
        key = (node.arg.name, node.tz)
        if key not in self.zones:
            self.zones.append(key)
        z = self.zones.index(key)
        a = self.expr(node.arg)
        return [f"{var} = date_part({a}, {PART_CODES[node.part]}, zs{z}, zo{z})"]

    def _reads_text(self, node: Expr) -> bool:
        """A number computed from text: a comparison, ``in``, a predicate, ``length``,
        ``isnull`` of a text function."""
        if isinstance(node, Binary) and node.op in ("eq", "ne"):
            return any(is_text(s, self.text_columns) for s in (node.left, node.right))
        if isinstance(node, Call) and node.fn in TEXT_PREDICATES:
            return True
        if isinstance(node, IsIn):
            return bool(node.values) and isinstance(node.values[0], str)
        if isinstance(node, Unary) and node.op == "isnull":  # of a column: its codes
            return is_text(node.arg, self.text_columns) and not isinstance(node.arg, Col)
        return isinstance(node, Unary) and node.op == "length"

    def _text_lookup(self, node: Expr, var: str) -> list[str]:
        names = {n.name for n in walk(node) if isinstance(n, Col)}
        if len(names) != 1:
            return self._evaluated(node, var)
        (column,) = names
        lookup = TextLookup(column, node)
        if lookup not in self.lookups:
            self.lookups.append(lookup)
        index = self.lookups.index(lookup)
        return [f"{var} = lut{index}[{self.code(column)}]"]

    def _evaluated(self, node: Expr, var: str) -> list[str]:
        for name in sorted({n.name for n in walk(node) if isinstance(n, Col)}):
            if name in self.text_columns:  # missing checks read the inputs
                self.code(name)
            else:
                self.column(name)
        if node not in self.evaluated:
            self.evaluated.append(node)
        return [f"{var} = ev{self.evaluated.index(node)}[i]"]

    def missing_inputs(self, node: Expr) -> str:
        """Python condition: some column the expression reads is missing in this row."""
        parts = []
        for name in sorted({n.name for n in _cols(node)}):
            if name in self.text_columns:
                parts.append(f"{self.code(name)} < 0")
            else:
                var = self.column(name)
                parts.append(f"{var} != {var}")
        return " or ".join(parts) if parts else "False"


def _cols(node: Expr) -> list[Col]:
    return [n for n in walk(node) if isinstance(n, Col)]


def is_text(node: Expr, text_columns: set[str]) -> bool:
    """Whether ``node``'s value is text (as :func:`fastprep.backends.reference.expressions.is_text`)."""
    if isinstance(node, Col):
        return node.name in text_columns
    if isinstance(node, Const):
        return isinstance(node.value, str)
    if isinstance(node, Unary):
        return node.op in TEXT_UNARY
    if isinstance(node, Binary) and node.op == "add":
        return is_text(node.left, text_columns) or is_text(node.right, text_columns)
    return False


def _minimum(a: str, b: str) -> str:
    """numpy's ``minimum``: NaN if either is NaN (``a`` if it is)."""
    return f"({a} if ({a} < {b} or {a} != {a}) else {b})"


def _maximum(a: str, b: str) -> str:
    return f"({a} if ({a} > {b} or {a} != {a}) else {b})"


def power_of_ten(n: int) -> float:
    """``10.0 ** n`` exactly as numpy's ``round`` computes its scale."""
    table = (1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8)
    if n < 9:
        return table[n]
    scale = 1e9
    for _ in range(n - 9):
        scale *= 10.0
    return scale


def _round_digits(a: str, digits: int) -> str:
    """numpy's ``round(x, digits)``: ``rint(x * f) / f``, or ``rint(x / f) * f`` below 0."""
    if digits == 0:
        return f"np.rint({a})"
    if digits > 0:
        f = repr(power_of_ten(digits))
        return f"np.rint({a} * {f}) / {f}"
    f = repr(power_of_ten(-digits))
    return f"np.rint({a} / {f}) * {f}"


def _literal(value: float | str) -> str:
    if isinstance(value, str):
        raise ValueError("string constants only appear in text comparisons")
    if value != value:
        return "np.nan"
    if value in (float("inf"), float("-inf")):
        return "np.inf" if value > 0 else "(-np.inf)"
    return repr(float(value))


def chain_code(emitter: _Emitter, index: int, chain: Chain, upto: int, counted: bool) -> list[str]:
    """Lines computing ``v{index}``: the chain's input, then its steps before ``upto``."""
    v = f"v{index}"
    lines = [f"{v} = {emitter.expr(chain.expr)}"]
    if not chain.plain:
        missing = emitter.missing_inputs(chain.expr)
        bump = emitter.count(index, "expr_not_finite", counted)
        lines += [
            f"if not np.isfinite({v}):",
            f"    if not ({missing}):",
            f"        {bump}",
            f"    {v} = np.nan",
        ]
    s = 0
    steps = chain.steps[:upto]
    while s < len(steps):
        run = _affine_run(steps, s) if counted else 1
        if run > 1:  # consecutive fitted affine steps collapse into one a * x + b
            last = s + run - 1
            a, b = (
                emitter.param(index, s, f"affine_a:{last}"),
                emitter.param(index, s, f"affine_b:{last}"),
            )
            lines.append(f"{v} = {v} * {a} + {b}")
        elif (
            s == 0
            and chain.plain
            and NUMBA.has(steps[0], "hoist")
            and chain.name not in emitter.text_columns
        ):  # the ufunc of the whole column by numpy's SIMD loop, ahead of the kernel
            func = NUMBA.entry(steps[0], "hoist")
            bump = emitter.count(index, f"{func}_domain", counted)
            lines += log1p_code(emitter.hoist(func, chain.name), v, bump)
        else:
            lines += _step_code(emitter, index, s, steps[s], v, counted)
        s += run
    return lines


def _affine_run(steps: tuple[Step, ...], start: int) -> int:
    """How many consecutive affine steps (Standardize, MinMax, MaxAbsScale, RobustScale)
    begin at ``start``."""
    end = start
    while end < len(steps) and NUMBA.has(steps[end], "affine"):
        end += 1
    return max(end - start, 1)


def compose_affine(
    steps: tuple[Step, ...], params: list[dict], first: int, last: int
) -> tuple[float, float]:
    """``(a, b)`` with ``a * x + b`` equal to steps ``first..last`` applied in order."""
    a, b = 1.0, 0.0
    for step, fitted in zip(steps[first : last + 1], params[first : last + 1]):
        a, b = NUMBA.entry(step, "affine")(step, fitted, a, b)
    return a, b


def _step_code(
    emitter: _Emitter, index: int, s: int, step: Step, v: str, counted: bool
) -> list[str]:
    return NUMBA.entry(step, "code")(emitter, index, s, step, v, counted)


def _header(emitter: _Emitter, extra: str) -> str:
    arrays = [f"c{i}" for i in range(len(emitter.number_columns))]
    arrays += [f"codes{i}" for i in range(len(emitter.code_columns))]
    arrays += [f"lut{i}" for i in range(len(emitter.lookups))]
    for i, (_, column) in enumerate(emitter.hoisted):
        arrays += [f"hk{i}", f"hl{i}"] if column in emitter.tabled else [f"hk{i}"]
    for i in range(len(emitter.zones)):
        arrays += [f"zs{i}", f"zo{i}"]
    arrays += [f"ev{i}" for i in range(len(emitter.evaluated))]
    return ", ".join([*arrays, "p", "n", "sel", extra])


def _row_loads(emitter: _Emitter, selected: bool) -> list[str]:
    """Read row ``i`` (or source row ``sel[i]``) of every input once, as float64."""
    loads = ["r = sel[i]" if selected else "r = i"]
    loads += [f"x{i} = np.float64(c{i}[r])" for i in range(len(emitter.number_columns))]
    for i, (_, column) in enumerate(emitter.hoisted):
        if column in emitter.tabled:  # the value's entry in the function's table
            loads.append(f"h{i} = hk{i}[c{emitter.number_columns.index(column)}[r] - hl{i}]")
        else:
            loads.append(f"h{i} = hk{i}[r]")
    return loads + [f"k{i} = codes{i}[r]" for i in range(len(emitter.code_columns))]


def _param_locals(emitter: _Emitter) -> list[str]:
    """The fitted parameters as locals before the row loop (``p3 = p[3]``): read once, not
    per row — LLVM could not keep them in registers across the stores to ``out`` (the
    transform of the flights numeric part ~5% faster)."""
    return [f"p{k} = p[{k}]" for k in range(len(emitter.params))]


def _helpers_version() -> str:
    """Hash of the helper module and this generator: Numba's on-disk cache does not notice
    when a function a cached kernel calls has changed, so the generated file name must."""
    from pathlib import Path

    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in ("kernels.py", "codegen.py", "exprs.py", "ops.py", "../moments.py"):
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:16]


_PRELUDE = f"""# generated by fastprep (helpers {_helpers_version()}); do not edit
import numpy as np
from numba import njit, prange
from fastprep.backends.moments import fold_block
from fastprep.backends.numba.exprs import date_part, floordiv, sign
from fastprep.backends.numba.kernels import (
    bin_of, box_cox, merge_range, quantile_normal, quantile_uniform, top16, yeo_johnson,
)

"""
#: the row loop is a plain (serial, vectorizable) function; the kernel runs chunks of rows
#: in parallel. A parfor body with the whole loop inline was measured 8x slower here.
_ROWS_DECORATOR = '@njit(fastmath=False, cache=True, error_model="numpy")'
_DECORATOR = '@njit(parallel=True, fastmath=False, cache=True, error_model="numpy")'
#: FASTPREP_NUMBA_PARALLEL=0 compiles the chunk loop serially: same code and results,
#: compiles ~10x faster (the test suite uses it for randomly generated pipelines)
_SERIAL_DECORATOR = '@njit(fastmath=False, cache=True, error_model="numpy")'


def _kernel_decorator() -> str:
    return _SERIAL_DECORATOR if os.environ.get("FASTPREP_NUMBA_PARALLEL") == "0" else _DECORATOR


def transform_program(
    chains: list[Chain],
    text_columns: set[str],
    selected: bool,
    tabled: frozenset[str] = frozenset(),
) -> Program:
    """The fused transform kernel for ``chains`` (all steps applied).

    ``selected``: rows are read through the index array ``sel`` (quarantined rows skipped
    without copying the inputs); output row ``i`` is source row ``sel[i]``. ``tabled``:
    integer columns whose hoisted functions are looked up in a small table by value.
    """
    emitter = _Emitter(text_columns, tabled)
    body: list[str] = []
    for index, chain in enumerate(chains):
        body += chain_code(emitter, index, chain, len(chain.steps), counted=True)
        body += [
            f"out[i, o{index}] = v{index}",
            # check what was stored: a finite float64 beyond float32's range becomes inf
            f"if not np.isfinite(out[i, o{index}]):",
            "    bad_row = True",
        ]
    row = [*_row_loads(emitter, selected), *emitter.lines, *body]
    n_rep = max(len(emitter.repairs), 1)
    args = _header(emitter, "out, offs")
    lines = [
        _ROWS_DECORATOR,
        f"def rows({args}, lo, hi, rep):",
        "    nbad = 0",
        *indent(_param_locals(emitter), 1),
        *[f"    o{k} = offs[{k}]" for k in range(len(chains))],
        "    for i in range(lo, hi):",
        "        bad_row = False",
        *indent(row, 2),
        "        if bad_row:",
        "            nbad += 1",
        "    return nbad",
        "",
        "",
        _kernel_decorator(),
        f"def kernel({args}, n_chunks, reps, bads):",
        "    size = (n + n_chunks - 1) // n_chunks",
        "    for c in prange(n_chunks):",
        "        lo = c * size",
        "        hi = min(n, lo + size)",
        f"        rep = np.zeros({n_rep}, np.int64)",
        f"        bads[c] = rows({args}, lo, hi, rep)",
        f"        for j in range({n_rep}):",
        "            reps[c, j] = rep[j]",
    ]
    source = _PRELUDE + "\n".join(lines) + "\n"
    return _program(source, emitter)


def _program(source: str, emitter: _Emitter) -> Program:
    return Program(
        source, emitter.number_columns, emitter.code_columns, emitter.lookups, emitter.params,
        hoisted=emitter.hoisted,
        tabled=frozenset(c for _, c in emitter.hoisted if c in emitter.tabled),
        zones=emitter.zones, evaluated=emitter.evaluated, repairs=emitter.repairs,
    )  # fmt: skip


def fit_program(
    chains: list[Chain],
    targets: list[tuple[int, int, str]],
    text_columns: set[str],
    selected: bool,
    tabled: frozenset[str] = frozenset(),
    extremes: frozenset[tuple[int, int]] = frozenset(),
) -> Program:
    """A fit round: each target ``(chain, step, kind)`` gets the chain's value before ``step``.

    ``kind`` "moments" folds values into block statistics, "range" only their count and
    extremes (all a ``MinMax`` needs: the sums were a quarter of a fit round's time);
    "median" counts the present
    values per bucket of their top 16 key bits (``hist{slot}[lane, bucket]``), from which
    :func:`median_gather_program` picks the bucket to select in. No buffer of the values:
    26 MB at 3.3M rows, written once and read twice.

    The kernel runs ``n_lanes`` parallel lanes, lane ``t`` taking chunks ``t, t + n_lanes,
    ...``: each lane owns a histogram row (no two threads count into one), each chunk its
    count and extremes, each lane its exact sums' bins (``sums``, ``squares``: exact, so
    the results depend neither on the lanes nor on the chunks).
    (Numba's ``get_thread_id`` in the row function failed to load from the disk cache.)
    ``tabled``: as :func:`transform_program`. ``extremes``: the (chain, step) whose
    "moments" also need their min and max (a fill folded into a ``MinMax``).
    """
    emitter = _Emitter(text_columns, tabled)
    body: list[str] = []
    moment_slots = [t for t in targets if t[2] in ("moments", "range")]
    median_slots = [t for t in targets if t[2] == "median"]
    computed: set[tuple[int, int]] = set()
    for chain_index, step_index, kind in targets:
        if (chain_index, step_index) not in computed:  # moments and median of one value
            computed.add((chain_index, step_index))
            body += chain_code(emitter, chain_index, chains[chain_index], step_index, counted=False)
        if kind in ("moments", "range"):
            slot = moment_slots.index((chain_index, step_index, kind))
            body.append(f"buf[{slot}, i - b0] = v{chain_index}")
        else:
            slot = median_slots.index((chain_index, step_index, kind))
            v = f"v{chain_index}"
            body += [f"if {v} == {v}:", f"    hist{slot}[lane, top16({v})] += 1"]
    row = [*_row_loads(emitter, selected), *emitter.lines, *body]
    medians = "".join(f", hist{i}" for i in range(len(median_slots)))
    args = _header(emitter, f"acc, sums, squares{medians}")
    k = len(moment_slots)
    lines = [
        _ROWS_DECORATOR,
        f"def rows({args}, c, lo, hi, lane):",
        *indent(_param_locals(emitter), 1),
        f"    buf = np.empty(({max(k, 1)}, {BLOCK}), np.float64)",
        f"    for b0 in range(lo, hi, {BLOCK}):",
        f"        b1 = min(hi, b0 + {BLOCK})",
        "        for i in range(b0, b1):",
        *indent(row, 3),
        *[
            f"        merge_range(acc[c], {slot}, buf[{slot}], b1 - b0)"
            if kind == "range"
            else f"        fold_block(acc[c], {slot}, buf[{slot}], b1 - b0, "
            f"{(chain, step) in extremes}, sums[lane, {slot}], squares[lane, {slot}])"
            for slot, (chain, step, kind) in enumerate(moment_slots)
        ],
        "        pass",
        "",
        "",
        _kernel_decorator(),
        f"def kernel({args}, n_chunks, n_lanes):",
        "    size = (n + n_chunks - 1) // n_chunks",
        "    for lane in prange(n_lanes):",
        "        for c in range(lane, n_chunks, n_lanes):",
        f"            rows({args}, c, c * size, min(n, c * size + size), lane)",
    ]
    source = _PRELUDE + "\n".join(lines) + "\n"
    program = _program(source, emitter)
    program.stats = moment_slots + median_slots
    return program


def median_gather_program(
    chains: list[Chain],
    chain_index: int,
    step_index: int,
    text_columns: set[str],
    selected: bool,
    tabled: frozenset[str] = frozenset(),
) -> Program:
    """The values of one top-16-bit bucket of a median target (chain ``chain_index``
    before step ``step_index``), computed again from the inputs, and the largest value
    below the bucket.

    Its lanes take the same chunks as the fit round's (:func:`fit_program`), so lane
    ``t`` finds exactly ``hist[t, bucket]`` values and writes them from ``offsets[t]``:
    one pass, no counting pass first. One pass over the inputs instead of a buffer of
    every value."""
    emitter = _Emitter(text_columns, tabled)
    body = chain_code(emitter, chain_index, chains[chain_index], step_index, counted=False)
    v = f"v{chain_index}"
    body += [
        f"if {v} == {v}:",
        f"    b = top16({v})",
        "    if b == bucket:",
        f"        out[at] = {v}",
        "        at += 1",
        f"    elif b < bucket and {v} > below:",
        f"        below = {v}",
    ]
    row = [*_row_loads(emitter, selected), *emitter.lines, *body]
    args = _header(emitter, "out, bucket")
    lines = [
        _ROWS_DECORATOR,
        f"def rows({args}, lo, hi, at, below):",
        *indent(_param_locals(emitter), 1),
        "    for i in range(lo, hi):",
        *indent(row, 2),
        "    return at, below",
        "",
        "",
        _kernel_decorator(),
        f"def kernel({args}, n_chunks, n_lanes, offsets, belows):",
        "    size = (n + n_chunks - 1) // n_chunks",
        "    for lane in prange(n_lanes):",
        "        at = offsets[lane]",
        "        below = -np.inf",
        "        for c in range(lane, n_chunks, n_lanes):",
        f"            at, below = rows({args}, c * size, min(n, c * size + size), at, below)",
        "        belows[lane] = below",
    ]
    source = _PRELUDE + "\n".join(lines) + "\n"
    return _program(source, emitter)
