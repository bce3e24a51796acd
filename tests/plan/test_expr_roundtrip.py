"""``to_source`` prints an expression tree as text that ``parse_expr`` reads back unchanged."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastprep.expr_parser import parse_expr
from fastprep.plan.expr import BINARY_OPS, Binary, Col, Const, Unary, Where, to_source
from fastprep.plan.nodes import expr_from_dict, expr_to_dict

FUNCTIONS = ("log", "log1p", "exp", "sqrt", "abs", "isnull")
PLAIN_NAMES = ("dep_delay", "air_time", "x", "Distance2", "_private")
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


def _extend(child):
    return st.one_of(
        st.builds(_unary, st.sampled_from(("neg", "not", *FUNCTIONS)), child),
        st.builds(Binary, st.sampled_from(sorted(BINARY_OPS)), child, child),
        st.builds(Where, child, child, child),
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
