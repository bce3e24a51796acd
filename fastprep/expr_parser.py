"""Parse ``fp.expr`` strings with Python's ``ast`` and a whitelist — never ``eval``.

Grammar (Python syntax, a small subset)::

    [name =] expression
    expression := number | column | `column with spaces` | 'text' (only compared with text)
                | expr (+ - * / % **) expr | -expr | ~expr | not expr
                | expr (< <= > >= == !=) expr     (chains like 0 < x < 5 become &)
                | expr (& | and | or) expr
                | where(c, a, b) | log(x) | log1p(x) | exp(x) | sqrt(x) | abs(x) | isnull(x)
                | nan | inf | pi | e | True | False

Anything else (attribute access, subscripts, other calls, lambdas, dunder names,
keyword arguments, starred args...) is rejected with the position of the offending part.
"""

from __future__ import annotations

import ast
import math
import re

from fastprep.errors import ExprSyntaxError
from fastprep.plan.expr import Binary, Col, Const, Expr, Unary, Where, to_source

MAX_LENGTH = 2_000
MAX_DEPTH = 60

_FUNCTIONS = {"log": 1, "log1p": 1, "exp": 1, "sqrt": 1, "abs": 1, "isnull": 1, "where": 3}
_NAMED_CONSTANTS = {"nan": math.nan, "inf": math.inf, "pi": math.pi, "e": math.e}
_BINOPS = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.Mod: "mod",
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
    source, quoted = _replace_backticks(text)
    try:
        module = ast.parse(source.strip(), mode="exec")
    except SyntaxError as exc:
        raise ExprSyntaxError(_syntax_message(text, exc)) from None
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
    tree = _Converter(text, quoted).convert(body, depth=0)
    return (name or to_source(tree)), tree


def _replace_backticks(text: str) -> tuple[str, dict[str, str]]:
    quoted: dict[str, str] = {}

    def substitute(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return match.group(1)
        key = f"_fpq{len(quoted)}_"
        quoted[key] = match.group(2)
        return key

    return _BACKTICK.sub(substitute, text), quoted


def _syntax_message(text: str, exc: SyntaxError) -> str:
    column = (exc.offset or 1) - 1
    pointer = " " * max(column, 0) + "^"
    return f"cannot parse expression ({exc.msg}):\n    {text.strip()}\n    {pointer}"


def _check_name(name: str, text: str) -> None:
    if name.startswith("__") or name in _FUNCTIONS or name in _NAMED_CONSTANTS:
        raise ExprSyntaxError(f"{name!r} cannot be used as an output name in {text!r}")


class _Converter:
    """Walk a Python AST, building plan nodes and rejecting everything not whitelisted."""

    def __init__(self, text: str, quoted: dict[str, str]) -> None:
        self.text = text
        self.quoted = quoted

    def reject(self, node: ast.AST, what: str) -> ExprSyntaxError:
        snippet = ast.get_source_segment(self.text, node) if hasattr(node, "lineno") else None
        where = f" (at column {node.col_offset + 1}: {snippet!r})" if snippet else ""
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
        operands = [self.convert(node.left, depth)] + [
            self.convert(c, depth) for c in node.comparators
        ]
        parts: list[Expr] = []
        for i, cmp in enumerate(node.ops):
            op = _CMPOPS.get(type(cmp))
            if op is None:
                raise self.reject(node, f"the comparison {type(cmp).__name__}")
            parts.append(Binary(op, operands[i], operands[i + 1]))
        result = parts[0]
        for part in parts[1:]:
            result = Binary("and", result, part)
        return result

    def visit_Call(self, node: ast.Call, depth: int) -> Expr:
        if not isinstance(node.func, ast.Name):
            raise self.reject(node, "calling anything but a whitelisted function")
        name = node.func.id
        if name not in _FUNCTIONS:
            allowed = ", ".join(sorted(_FUNCTIONS))
            raise self.reject(node, f"the function {name!r} (allowed: {allowed})")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.reject(node, "keyword or starred arguments")
        if len(node.args) != _FUNCTIONS[name]:
            raise ExprSyntaxError(
                f"{name}() takes {_FUNCTIONS[name]} argument(s), got {len(node.args)}: {self.text!r}"
            )
        args = [self.convert(a, depth) for a in node.args]
        if name == "where":
            return Where(*args)
        return Unary(name, args[0])
