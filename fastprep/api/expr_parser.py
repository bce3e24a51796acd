"""Parse ``fp.expr`` strings with Python's ``ast`` and a whitelist — never ``eval``.

Grammar (Python syntax, a small subset)::

    [name =] expression
    expression := number | column | `column with spaces` | 'text' (only compared with text)
                | expr (+ - * / % **) expr | -expr | ~expr | not expr
                | expr (< <= > >= == !=) expr     (chains like 0 < x < 5 become &)
                | expr (& | and | or) expr
                | expr // expr                     (numpy.floor_divide)
                | expr [not] in (literal, ...)     (numbers or quoted strings)
                | where(c, a, b) | log(x) | log1p(x) | exp(x) | sqrt(x) | abs(x) | isnull(x)
                | floor | ceil | trunc | round | sign | log2 | log10 | sin | cos | tan (x)
                | round(x, n) | pow(x, y) | min(a, b, ...) | max(a, b, ...) | clip(x, lo, hi)
                | year | month | day | hour | minute | second | dayofweek | dayofyear
                  | quarter (datetime column)
                | length | lower | upper | strip (text) | startswith | endswith
                  | contains (text, 'literal') | text + text
                | nan | inf | pi | e | True | False
                | lookup.column                    (a column of a declared lookup table)

``lookup.column`` (``planes.year``) is parsed as the column named ``"planes.year"``; the
pipeline, which knows its lookups, refuses it unless ``planes`` is a declared lookup with
that column (:func:`fastprep.api.lookup.check_qualified_names`). Anything else (other
attribute access: dunders, chains, attributes of calls; subscripts, other calls, lambdas, dunder names,
keyword arguments, starred args...) is rejected with the position of the offending part.
"""

from __future__ import annotations

import ast
import math
import re

from fastprep.errors import ExprSyntaxError
from fastprep.plan.expr import (
    CALL_ARITY,
    DATE_PARTS,
    UNARY_OPS,
    Binary,
    Call,
    Col,
    Const,
    DatePart,
    Expr,
    IsIn,
    Unary,
    Where,
    to_source,
)

MAX_LENGTH = 2_000
MAX_DEPTH = 60

#: reserved function names: never a column name without backticks
_FUNCTIONS = {"log": 1, "log1p": 1, "exp": 1, "sqrt": 1, "abs": 1, "isnull": 1, "where": 3}
#: the other functions: name -> (fewest, most arguments); these names stay usable as
#: plain column names (``hour``, ``day``, ``min``) wherever they are not called
_MORE_FUNCTIONS: dict[str, tuple[int, int | None]] = {
    **{op: (1, 1) for op in UNARY_OPS if op not in _FUNCTIONS and op not in ("neg", "not")},
    **{part: (1, 1) for part in DATE_PARTS},
    **CALL_ARITY,
    "round": (1, 2),
    "pow": (2, 2),
}
_NAMED_CONSTANTS = {"nan": math.nan, "inf": math.inf, "pi": math.pi, "e": math.e}
_BINOPS = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.Mod: "mod",
    ast.FloorDiv: "floordiv",
    ast.Pow: "pow",
    ast.BitAnd: "and",
    ast.BitOr: "or",
}
_CMPOPS = {
    ast.Lt: "lt",
    ast.LtE: "le",
    ast.Gt: "gt",
    ast.GtE: "ge",
    ast.Eq: "eq",
    ast.NotEq: "ne",
}
#: a quoted string literal (left alone) or a backticked column name (replaced)
_BACKTICK = re.compile(r"""('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")|`([^`]+)`""")


def parse_expr(text: str) -> tuple[str, Expr]:
    """Parse ``"name = expression"`` (or a bare expression) into ``(name, tree)``.

    A bare expression is named by its canonical printed form.
    """
    if not isinstance(text, str):
        raise ExprSyntaxError(f"fp.expr needs a string, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ExprSyntaxError(f"expression is {len(text)} characters; the limit is {MAX_LENGTH}")
    source = _Source(text)
    quoted = source.quoted
    try:
        module = ast.parse(source.parsed, mode="exec")
    except SyntaxError as exc:
        raise ExprSyntaxError(_syntax_message(source, exc)) from None
    except RecursionError:
        raise ExprSyntaxError(f"expression nests too deeply: {text[:80]!r}") from None
    if len(module.body) != 1:
        raise ExprSyntaxError(
            f"expected one expression, got {len(module.body)} statements: {text!r}"
        )
    statement = module.body[0]
    name: str | None = None
    if isinstance(statement, ast.Assign):
        if len(statement.targets) != 1 or not isinstance(statement.targets[0], ast.Name):
            raise ExprSyntaxError(f"the left of '=' must be one output name: {text!r}")
        name = quoted.get(statement.targets[0].id, statement.targets[0].id)
        _check_name(name, text)
        body = statement.value
    elif isinstance(statement, ast.Expr):
        body = statement.value
    else:
        raise ExprSyntaxError(f"not an expression: {text!r}")
    tree = _Converter(source).convert(body, depth=0)
    return (name or to_source(tree)), tree


class _Source:
    """The text Python parses (each backticked name replaced by an identifier, the blanks
    around it dropped) and the way back from its positions to the user's text, so an error
    names the column and the part the user wrote."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.quoted: dict[str, str] = {}
        #: (start, end) of each identifier in the replaced text, (start, end) in ``text``
        self.spans: list[tuple[int, int, int, int]] = []
        pieces: list[str] = []
        at = length = 0
        for match in _BACKTICK.finditer(text):
            if match.group(2) is None:  # a quoted string literal: left alone
                continue
            key = f"_fpq{len(self.quoted)}_"
            self.quoted[key] = match.group(2)
            pieces.append(text[at : match.start()])
            length += match.start() - at
            self.spans.append((length, length + len(key), match.start(), match.end()))
            pieces.append(key)
            length += len(key)
            at = match.end()
        replaced = "".join(pieces) + text[at:]
        self.lead = len(replaced) - len(replaced.lstrip())
        self.parsed = replaced.strip()
        self._lines = self.parsed.splitlines(keepends=True)

    def offset(self, lineno: int, column: int, in_bytes: bool) -> int:
        """The offset in ``text`` of (``lineno``, ``column``) of the parsed text (a column
        in UTF-8 bytes as ``ast`` counts, or in characters as ``SyntaxError`` does)."""
        lines = self._lines[: max(lineno - 1, 0)]
        line = self._lines[lineno - 1] if 0 < lineno <= len(self._lines) else ""
        if in_bytes:
            column = len(line.encode()[:column].decode(errors="ignore"))
        at = self.lead + sum(len(part) for part in lines) + column
        shift = 0
        for start, end, old_start, old_end in self.spans:
            if at >= end:
                shift += (old_end - old_start) - (end - start)
            elif at >= start:  # inside a replaced name: its backticked original
                return old_start
        return at + shift

    def locate(self, node: ast.AST) -> tuple[int, str] | None:
        """(1-based column in its line, the text) of ``node`` as the user wrote it."""
        if not hasattr(node, "lineno") or getattr(node, "end_lineno", None) is None:
            return None
        start = self.offset(node.lineno, node.col_offset, in_bytes=True)
        end = self.offset(node.end_lineno, node.end_col_offset, in_bytes=True)  # type: ignore[attr-defined, arg-type]
        return start - self.text.rfind("\n", 0, start), self.text[start:end]


def _syntax_message(source: _Source, exc: SyntaxError) -> str:
    at = source.offset(exc.lineno or 1, (exc.offset or 1) - 1, in_bytes=False)
    line_start = source.text.rfind("\n", 0, at) + 1
    line_end = source.text.find("\n", at)
    line = source.text[line_start : None if line_end < 0 else line_end]
    pointer = " " * (at - line_start) + "^"
    return f"cannot parse expression ({exc.msg}):\n    {line}\n    {pointer}"


def _check_name(name: str, text: str) -> None:
    why = (
        "a dunder name" if name.startswith("__")
        else "the function of that name" if name in _FUNCTIONS
        else "the constant of that name" if name in _NAMED_CONSTANTS
        else None
    )  # fmt: skip
    if why is not None:  # a later expression could not read it: the name means `why` there
        raise ExprSyntaxError(
            f"{name!r} cannot be used as an output name in {text!r} (it is {why} in "
            "expressions); choose another name"
        )


class _Converter:
    """Walk a Python AST, building plan nodes and rejecting everything not whitelisted."""

    def __init__(self, source: _Source) -> None:
        self.source = source
        self.text = source.text
        self.quoted = source.quoted

    def reject(self, node: ast.AST, what: str) -> ExprSyntaxError:
        found = self.source.locate(node)
        where = f" (at column {found[0]}: {found[1]!r})" if found and found[1] else ""
        return ExprSyntaxError(f"{what} is not allowed in fp.expr{where}: {self.text!r}")

    def convert(self, node: ast.AST, depth: int) -> Expr:
        if depth > MAX_DEPTH:
            raise ExprSyntaxError(
                f"expression nests deeper than {MAX_DEPTH} levels: {self.text[:80]!r}"
            )
        method = getattr(self, f"visit_{type(node).__name__}", None)
        if method is None:
            raise self.reject(node, type(node).__name__)
        return method(node, depth + 1)

    def visit_Constant(self, node: ast.Constant, depth: int) -> Expr:
        value = node.value
        if isinstance(value, bool):
            return Const(float(value))
        if isinstance(value, (int, float)):
            return Const(float(value))
        if isinstance(value, str):
            return Const(value)
        raise self.reject(node, f"the constant {value!r}")

    def visit_Name(self, node: ast.Name, depth: int) -> Expr:
        if node.id in self.quoted:
            return Col(self.quoted[node.id])
        if node.id.startswith("__"):
            raise self.reject(node, "a dunder name")
        if node.id in _NAMED_CONSTANTS:
            return Const(_NAMED_CONSTANTS[node.id])
        if node.id in _FUNCTIONS:
            raise self.reject(node, f"the function name {node.id!r} without a call")
        return Col(node.id)

    def visit_Attribute(self, node: ast.Attribute, depth: int) -> Expr:
        """Only ``name.name``: a qualified column reference, never an attribute lookup."""
        owner = node.value
        if not isinstance(owner, ast.Name) or not isinstance(node.ctx, ast.Load):
            raise self.reject(node, "attribute access")
        table = self.quoted.get(owner.id, owner.id)
        column = self.quoted.get(node.attr, node.attr)
        for part in (table, column):
            if part.startswith("_"):
                raise self.reject(node, "attribute access to a private or dunder name")
        if owner.id in _FUNCTIONS or owner.id in _NAMED_CONSTANTS or owner.id in self.quoted:
            raise self.reject(node, "attribute access")
        return Col(f"{table}.{column}")

    def visit_UnaryOp(self, node: ast.UnaryOp, depth: int) -> Expr:
        operand = self.convert(node.operand, depth)
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(node.op, ast.USub):
            if isinstance(operand, Const) and isinstance(operand.value, float):
                return Const(-operand.value)
            return Unary("neg", operand)
        return Unary("not", operand)  # ast.Not and ast.Invert

    def visit_BinOp(self, node: ast.BinOp, depth: int) -> Expr:
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.reject(node, f"the operator {type(node.op).__name__}")
        return Binary(op, self.convert(node.left, depth), self.convert(node.right, depth))

    def visit_BoolOp(self, node: ast.BoolOp, depth: int) -> Expr:
        op = "and" if isinstance(node.op, ast.And) else "or"
        values = [self.convert(v, depth) for v in node.values]
        result = values[0]
        for value in values[1:]:
            result = Binary(op, result, value)
        return result

    def visit_Compare(self, node: ast.Compare, depth: int) -> Expr:
        sides = [node.left, *node.comparators]
        member = [isinstance(c, (ast.In, ast.NotIn)) for c in node.ops]
        # the right side of ``in`` is a literal list, not an operand
        operands = [
            None if i > 0 and member[i - 1] else self.convert(side, depth)
            for i, side in enumerate(sides)
        ]
        parts: list[Expr] = []
        for i, cmp in enumerate(node.ops):
            left = operands[i]
            if left is None:
                raise self.reject(node, "comparing the literal list of 'in'")
            if member[i]:
                values = self._literal_list(sides[i + 1])
                parts.append(IsIn(left, values, isinstance(cmp, ast.NotIn)))
                continue
            op = _CMPOPS.get(type(cmp))
            right = operands[i + 1]
            if op is None or right is None:
                raise self.reject(node, f"the comparison {type(cmp).__name__}")
            parts.append(Binary(op, left, right))
        result = parts[0]
        for part in parts[1:]:
            result = Binary("and", result, part)
        return result

    def _literal_list(self, node: ast.AST) -> tuple[float | str, ...]:
        """The right side of ``in``: a parenthesized list of number or text literals."""
        if not isinstance(node, (ast.Tuple, ast.List, ast.Set)) or not node.elts:
            raise self.reject(node, "'in' with anything but a list of literals like (1, 2)")
        values: list[float | str] = []
        for element in node.elts:
            value = self.convert(element, 1)
            if not isinstance(value, Const):
                raise self.reject(element, "a non-literal inside the list of 'in'")
            if value.value != value.value:
                raise self.reject(
                    element, "nan in the list of 'in' (it matches nothing; use isnull)"
                )
            values.append(value.value)
        if len({isinstance(v, str) for v in values}) > 1:
            raise self.reject(node, "mixing numbers and text in the list of 'in'")
        return tuple(values)

    def visit_Call(self, node: ast.Call, depth: int) -> Expr:
        if not isinstance(node.func, ast.Name):
            raise self.reject(node, "calling anything but a whitelisted function")
        name = node.func.id
        if name not in _FUNCTIONS and (name not in _MORE_FUNCTIONS or name in self.quoted):
            allowed = ", ".join(sorted({*_FUNCTIONS, *_MORE_FUNCTIONS}))
            raise self.reject(node, f"the function {name!r} (allowed: {allowed})")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.reject(node, "keyword or starred arguments")
        fewest, most = _MORE_FUNCTIONS.get(name, (_FUNCTIONS.get(name, 0),) * 2)
        if len(node.args) < fewest or (most is not None and len(node.args) > most):
            wanted = f"{fewest}" if fewest == most else f"{fewest} or more"
            if most is not None and most != fewest:
                wanted = f"{fewest} to {most}"
            raise ExprSyntaxError(
                f"{name}() takes {wanted} argument(s), got {len(node.args)}: {self.text!r}"
            )
        args = [self.convert(a, depth) for a in node.args]
        return self._function(node, name, args)

    def _function(self, node: ast.Call, name: str, args: list[Expr]) -> Expr:
        if name == "where":
            return Where(*args)
        if name == "pow":
            return Binary("pow", args[0], args[1])
        if name in DATE_PARTS:
            return DatePart(name, args[0])
        if name == "round" and len(args) == 2:
            digits = args[1]
            if not (isinstance(digits, Const) and isinstance(digits.value, float)
                    and digits.value.is_integer()):  # fmt: skip
                raise self.reject(node, "round(x, n) with n not a whole-number literal")
            if abs(digits.value) > 300:  # 10 ** n overflows: numpy's result is all NaN
                raise self.reject(node, "round(x, n) with n beyond -300..300")
        if name in CALL_ARITY and (name != "round" or len(args) == 2):
            if name in ("startswith", "endswith", "contains") and not (
                isinstance(args[1], Const) and isinstance(args[1].value, str)
            ):
                raise self.reject(node, f"{name}(text, 'literal') without a quoted literal")
            return Call(name, tuple(args))
        return Unary(name, args[0])
