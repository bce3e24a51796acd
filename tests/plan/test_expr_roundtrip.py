"""``to_source`` prints an expression tree as text that ``parse_expr`` reads back unchanged."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastprep.api.expr_parser import parse_expr
from fastprep.plan.expr import (
    BINARY_OPS,
    DATE_PARTS,
    Binary,
    Call,
    Col,
    Const,
    DatePart,
    IsIn,
    Unary,
    Where,
    to_source,
)
from fastprep.plan.nodes import expr_from_dict, expr_to_dict

FUNCTIONS = (
    "log", "log1p", "exp", "sqrt", "abs", "isnull", "floor", "ceil", "trunc", "round", "sign",
    "log2", "log10", "sin", "cos", "tan", "length", "lower", "upper", "strip",
)  # fmt: skip
#: column names that are also (unreserved) function names: a column wherever not called
PLAIN_NAMES = ("dep_delay", "air_time", "x", "Distance2", "_private", "hour", "min", "length")
QUOTED_NAMES = ("air time", "dep-delay", "2nd", "a.b", "x+y")

columns = st.sampled_from(PLAIN_NAMES + QUOTED_NAMES).map(Col)
numbers = st.floats(allow_nan=False, allow_infinity=False, width=64).map(Const)
small_numbers = st.integers(-5, 5).map(lambda i: Const(float(i)))
infinities = st.sampled_from([float("inf"), float("-inf")]).map(Const)
texts = st.text(alphabet="ABCxyz _'\"", max_size=5).map(Const)
leaves = st.one_of(columns, small_numbers, numbers, infinities, texts)


def _unary(op: str, arg):
    # the parser folds ``-<number>`` into a negative constant: it never builds neg(Const)
    if op == "neg" and isinstance(arg, Const):
        return Unary("abs", arg)
    return Unary(op, arg)


literals = st.one_of(
    st.lists(st.integers(-3, 3).map(float), min_size=1, max_size=3),
    st.lists(st.floats(allow_nan=False, width=64), min_size=1, max_size=2),
    st.lists(st.text(alphabet="AB x'\"", max_size=3), min_size=1, max_size=3),
).map(tuple)


def _extend(child):
    return st.one_of(
        st.builds(_unary, st.sampled_from(("neg", "not", *FUNCTIONS)), child),
        st.builds(Binary, st.sampled_from(sorted(BINARY_OPS)), child, child),
        st.builds(Where, child, child, child),
        st.builds(
            lambda f, a: Call(f, tuple(a)),
            st.sampled_from(["min", "max"]),
            st.lists(child, min_size=2, max_size=4),
        ),
        st.builds(lambda a, b, c: Call("clip", (a, b, c)), child, child, child),
        st.builds(lambda a, n: Call("round", (a, Const(float(n)))), child, st.integers(-5, 5)),
        st.builds(
            lambda f, a, t: Call(f, (a, t)),
            st.sampled_from(["startswith", "endswith", "contains"]),
            child,
            texts,
        ),
        st.builds(IsIn, child, literals, st.booleans()),
        st.builds(DatePart, st.sampled_from(DATE_PARTS), columns),
    )


trees = st.recursive(leaves, _extend, max_leaves=12)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees)
def test_print_then_parse_gives_the_same_tree(tree):
    text = to_source(tree)
    name, parsed = parse_expr(text)
    assert parsed == tree, text
    # a bare expression is named by its canonical printed form
    assert name == text


@settings(max_examples=200, deadline=None)
@given(trees)
def test_printing_is_a_fixed_point(tree):
    text = to_source(tree)
    assert to_source(parse_expr(text)[1]) == text


@settings(max_examples=200, deadline=None)
@given(trees)
def test_json_tree_round_trip(tree):
    assert expr_from_dict(expr_to_dict(tree)) == tree


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a + b * c", Binary("add", Col("a"), Binary("mul", Col("b"), Col("c")))),
        ("(a + b) * c", Binary("mul", Binary("add", Col("a"), Col("b")), Col("c"))),
        ("a - b - c", Binary("sub", Binary("sub", Col("a"), Col("b")), Col("c"))),
        ("a - (b - c)", Binary("sub", Col("a"), Binary("sub", Col("b"), Col("c")))),
        ("a ** b ** c", Binary("pow", Col("a"), Binary("pow", Col("b"), Col("c")))),
        ("-a ** 2", Unary("neg", Binary("pow", Col("a"), Const(2.0)))),
        ("(-a) ** 2", Binary("pow", Unary("neg", Col("a")), Const(2.0))),
        (
            "0 < x < 5",
            Binary("and", Binary("lt", Const(0.0), Col("x")), Binary("lt", Col("x"), Const(5.0))),
        ),
        (
            "(a > 1) & (b < 2)",
            Binary("and", Binary("gt", Col("a"), Const(1.0)), Binary("lt", Col("b"), Const(2.0))),
        ),
        (
            "a > 1 and b < 2",
            Binary("and", Binary("gt", Col("a"), Const(1.0)), Binary("lt", Col("b"), Const(2.0))),
        ),
        ("not a or b", Binary("or", Unary("not", Col("a")), Col("b"))),
        ("~isnull(x)", Unary("not", Unary("isnull", Col("x")))),
        (
            "where(x > 0, log1p(x), 0)",
            Where(Binary("gt", Col("x"), Const(0.0)), Unary("log1p", Col("x")), Const(0.0)),
        ),
        ("`air time` / 60", Binary("div", Col("air time"), Const(60.0))),
        ("origin == 'JFK'", Binary("eq", Col("origin"), Const("JFK"))),
        ("True + False", Binary("add", Const(1.0), Const(0.0))),
        ("-3.5", Const(-3.5)),
        ("+x", Col("x")),
        ("x // 2 % 3", Binary("mod", Binary("floordiv", Col("x"), Const(2.0)), Const(3.0))),
        ("pow(x, 2)", Binary("pow", Col("x"), Const(2.0))),
        ("round(x)", Unary("round", Col("x"))),
        ("round(x, -2)", Call("round", (Col("x"), Const(-2.0)))),
        ("min(a, b, 1)", Call("min", (Col("a"), Col("b"), Const(1.0)))),
        ("hour(t) + hour", Binary("add", DatePart("hour", Col("t")), Col("hour"))),
        ("x in (1, -2)", IsIn(Col("x"), (1.0, -2.0))),
        ("s not in ('a',)", IsIn(Col("s"), ("a",), negate=True)),
        ("a + 1 in (2,)", IsIn(Binary("add", Col("a"), Const(1.0)), (2.0,))),
        ("(a in (1,)) == 1", Binary("eq", IsIn(Col("a"), (1.0,)), Const(1.0))),
        (
            "lower(s) + '-' + t",
            Binary("add", Binary("add", Unary("lower", Col("s")), Const("-")), Col("t")),
        ),
        ("startswith(s, 'N')", Call("startswith", (Col("s"), Const("N")))),
    ],
)
def test_parse_known_trees(text, expected):
    _, tree = parse_expr(text)
    assert tree == expected
    assert parse_expr(to_source(tree))[1] == expected


def test_assignment_names_the_output():
    assert parse_expr("speed = distance / air_time * 60")[0] == "speed"
    assert parse_expr("`air speed` = distance / `air time`") == (
        "air speed",
        Binary("div", Col("distance"), Col("air time")),
    )


def test_negative_constant_as_base_of_power_round_trips():
    # the parser builds Const(-2.0) for ``(-2) ** x``; printing must keep the parentheses
    _, tree = parse_expr("(-2) ** x")
    assert tree == Binary("pow", Const(-2.0), Col("x"))
    assert parse_expr(to_source(tree))[1] == tree


@pytest.mark.parametrize(
    "name",
    ["class", "lambda", "in", "e", "pi", "nan", "inf", "True", "log", "where", "isnull"],
)
def test_column_named_like_a_keyword_or_builtin_round_trips(name):
    # a schema may have such columns (e.g. "class"); backticks reach them, and the printer
    # must produce text the parser reads back as the same column
    tree = Binary("add", Col(name), Const(1.0))
    assert parse_expr(f"`{name}` + 1")[1] == tree
    assert parse_expr(to_source(tree))[1] == tree
