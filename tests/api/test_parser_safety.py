"""``fp.expr`` only accepts the whitelisted grammar; nothing in a string is ever executed."""

from __future__ import annotations

import pytest

import fastprep as fp
from fastprep.api.expr_parser import MAX_LENGTH, parse_expr

SCHEMA = fp.Schema({"x": fp.Float(nullable=True), "y": fp.Float(nullable=True)})

REJECTED = [
    # attribute access (``name.name`` parses as a lookup column, checked by the pipeline:
    # see test_attribute_access_is_refused_by_the_pipeline)
    "x.__class__",
    "x.real.imag",
    "x._private",
    "nan.real",
    "log.x",
    "().__class__.__bases__[0].__subclasses__()",
    "log(x).imag",
    # dunder names
    "__import__",
    "__builtins__ + 1",
    "z = __debug__",
    "__class__ = x",
    # subscripts and slices
    "x[0]",
    "x[1:2]",
    # lambdas and calls outside the whitelist
    "(lambda: 1)()",
    "lambda: x",
    "open('/etc/passwd')",
    "eval('1 + 1')",
    "exec('x = 1')",
    "getattr(x, 'real')",
    "globals()",
    "print(x)",
    "sum(x, y)",
    "len(x)",
    "str(x)",
    "format(x)",
    # the functions added later: whitelisted names, checked arity and literal arguments
    "max(x)",
    "min()",
    "round(x, y)",
    "round(x, 1.5)",
    "round(x, 1, 2)",
    "clip(x, 0)",
    "pow(x)",
    "hour(x, 'UTC')",
    "startswith(x, y)",
    "contains(x, upper('a'))",
    "`floor`(x)",
    "floor(x=1)",
    "max(*x)",
    "log(x)(y)",
    # keyword and starred arguments, wrong arity
    "log(x=1)",
    "where(x > 0, y, otherwise=0)",
    "log(*x)",
    "log(x, y)",
    "where(x, y)",
    "sqrt()",
    # walrus, comprehensions, generators, containers
    "(z := x + 1)",
    "[i for i in x]",
    "{i for i in x}",
    "{i: i for i in x}",
    "sum(i for i in x)",
    "[x, y]",
    "(x, y)",
    "{x: y}",
    "{x}",
    # f-strings and other literals
    "f'{x}'",
    'f\'{__import__("os").system("true")}\'',
    "b'x' == x",
    "1j + x",
    "...",
    "None",
    # operators and statements outside the grammar
    "x // y // (z := 1)",
    "x << 1",
    "x ^ y",
    "x @ y",
    "x if y else 0",
    "x in y",
    "x in ()",
    "x in (y, 1)",
    "x in (1, 'a')",
    "x in (1, nan)",
    "x in [i for i in y]",
    "x in (1,) < 2",
    "x in {1: 2}",
    "x is y",
    "x is not y",
    "x not in y",
    "import os",
    "from os import system",
    "x = 1; y = 2",
    "x = 1\nimport os",
    "del x",
    "x += 1",
    "a, b = x, y",
    "a = b = x",
    "x.y = 1",
    "assert x",
    "yield x",
    "await x",
    "async def f(): pass",
    "def f(): pass",
    "class A: pass",
    "global x",
    "raise SystemExit",
    "with open('f') as g: pass",
    "for i in x: pass",
    "while x: pass",
    # the output name must be a plain, non-reserved name
    "log = x",
    "where = x + 1",
    "nan = x",
    "__init__ = x",
    # malformed
    "x +",
    "(x",
    "x y",
    "",
    "   ",
    "=",
    "speed = ",
    "@x",
]


@pytest.mark.parametrize("text", REJECTED)
def test_rejected(text):
    with pytest.raises(fp.ExprSyntaxError):
        parse_expr(text)
    with pytest.raises(fp.ExprSyntaxError):
        fp.expr(text)


def test_expr_syntax_error_is_a_value_error():
    assert issubclass(fp.ExprSyntaxError, ValueError)
    assert issubclass(fp.ExprSyntaxError, fp.PipelineDefinitionError)
    with pytest.raises(ValueError):
        fp.Pipeline(SCHEMA, [fp.expr("y = x.real")])


@pytest.mark.parametrize("text", ["x.real", "y = x.imag + 1", "os.system", "planes.year"])
def test_attribute_access_is_refused_by_the_pipeline(text):
    """``a.b`` is only ever a column of a declared lookup table (``planes.year``): with no
    such lookup the pipeline refuses it when it is built, as attribute access."""
    with pytest.raises(fp.ExprSyntaxError, match="attribute access"):
        fp.Pipeline(SCHEMA, [fp.expr(text)])


@pytest.mark.parametrize("value", [None, 3, b"x + 1", ["x"]])
def test_non_string_is_rejected(value):
    with pytest.raises(fp.ExprSyntaxError):
        fp.expr(value)


def test_rejection_points_at_the_offending_part():
    with pytest.raises(fp.ExprSyntaxError) as info:
        fp.expr("speed = distance / open('x')")
    message = str(info.value)
    assert "open" in message
    assert "allowed" in message  # lists the whitelist
    with pytest.raises(fp.ExprSyntaxError) as info:
        fp.Pipeline(SCHEMA, [fp.expr("speed = x.real")])
    assert "x.real" in str(info.value)


@pytest.mark.parametrize(
    ("text", "column", "part"),
    [
        ("v = `a very odd name` + foo(x)", 25, "foo(x)"),  # a backticked name before it
        ("   v = `température` + foo(x)", 24, "foo(x)"),  # leading blanks, non-ASCII
        ("v = é + foo(x)", 9, "foo(x)"),  # Python counts UTF-8 bytes
        ("v = `a b` + `c d` @ 2", 13, "`c d` @ 2"),  # the part itself backticked
        ("v = (`a b` +\n  foo(y))", 3, "foo(y)"),  # the column in its own line
    ],
)
def test_the_position_is_the_one_in_the_text_written(text, column, part):
    """Backticked names are replaced before Python parses: the error still names the
    column and the part of the expression as the user wrote it."""
    with pytest.raises(fp.ExprSyntaxError) as info:
        fp.expr(text)
    assert f"(at column {column}: {part!r})" in str(info.value)
    assert text.splitlines()[-1 if "\n" in text else 0][column - 1 :].startswith(part)


def test_a_syntax_error_points_under_the_text_written():
    with pytest.raises(fp.ExprSyntaxError) as info:
        fp.expr("v = `a b` ++ * 2")
    _, line, pointer = str(info.value).splitlines()
    assert line.strip() == "v = `a b` ++ * 2"
    assert line[pointer.index("^")] == "*"


def test_round_digits_beyond_300_are_named_as_such():
    with pytest.raises(fp.ExprSyntaxError, match=r"n beyond -300\.\.300"):
        fp.expr("v = round(x, 400)")
    with pytest.raises(fp.ExprSyntaxError, match="whole-number literal"):
        fp.expr("v = round(x, 1.5)")


def test_a_reserved_output_name_says_why():
    with pytest.raises(fp.ExprSyntaxError, match=r"'e' cannot.*the constant of that name"):
        fp.expr("e = x in (1, 3)")
    with pytest.raises(fp.ExprSyntaxError, match=r"'log' cannot.*the function of that name"):
        fp.expr("log = x")


def test_over_long_expression_is_rejected():
    text = "x + " * (MAX_LENGTH // 4) + "x"
    assert len(text) > 2000
    with pytest.raises(fp.ExprSyntaxError, match="limit"):
        fp.expr(text)
    # just under the limit but still a valid flat expression of moderate depth is fine
    fp.expr("x + " * 20 + "x")


@pytest.mark.parametrize(
    "text",
    [
        "(" * 150 + "x" + " + 1)" * 150,
        "(" * 600 + "x" + ")" * 600,
        "-" * 500 + "x",
        "~" * 900 + "x",
        "log(" * 200 + "x" + ")" * 200,
        "x" + " ** x" * 300,
        "x" + " + x" * 450,
        "where(x, " * 100 + "x" + ", 1, 2)" * 100,
    ],
)
def test_deeply_nested_expressions_are_rejected(text):
    assert len(text) <= 2000
    with pytest.raises(fp.ExprSyntaxError):
        fp.expr(text)


def test_moderate_nesting_is_accepted():
    _, tree = parse_expr("(" * 20 + "x" + ")" * 20)
    assert tree == parse_expr("x")[1]
    parse_expr("-" * 30 + "x")


@pytest.mark.parametrize(
    "payload",
    [
        "__import__('os').system('touch {p}')",
        "z = __import__('os').system('touch {p}')",
        "open('{p}', 'w')",
        "exec(\"open('{p}', 'w')\")",
        "eval(\"open('{p}', 'w')\")",
        "x + [open('{p}', 'w') for _ in [1]][0]",
        "(lambda: open('{p}', 'w'))()",
        "f\"{{open('{p}', 'w')}}\"",
        "where(x, open('{p}', 'w'), 0)",
        "log(__import__('pathlib').Path('{p}').touch())",
    ],
)
def test_no_code_is_ever_executed(tmp_path, payload):
    sentinel = tmp_path / "sentinel"
    text = payload.format(p=sentinel)
    with pytest.raises(fp.ExprSyntaxError):
        fp.expr(text)
    assert not sentinel.exists()


def test_no_code_executed_through_a_whole_pipeline(tmp_path):
    sentinel = tmp_path / "sentinel"
    with pytest.raises(fp.ExprSyntaxError):
        fp.Pipeline(
            SCHEMA,
            [fp.col("x"), fp.expr(f"z = __import__('os').system('touch {sentinel}')")],
        )
    with pytest.raises(fp.ExprSyntaxError):
        fp.Pipeline(
            SCHEMA,
            [fp.col("x")],
            target=fp.expr(f"t = __import__('os').system('touch {sentinel}')"),
        )
    assert not sentinel.exists()


def test_backticks_quote_any_column_name_safely():
    # a backticked name is only ever a column reference, never code
    _, tree = parse_expr("`__import__('os')` + 1")
    assert tree.left == fp.plan.Col("__import__('os')")  # type: ignore[attr-defined]


def test_backticks_inside_a_string_literal_are_text():
    # backtick quoting must not rewrite the inside of a quoted string
    _, tree = parse_expr("origin == 'a`b`c'")
    assert tree.right == fp.plan.Const("a`b`c")  # type: ignore[attr-defined]
