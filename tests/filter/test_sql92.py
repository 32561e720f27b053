"""RocketMQ SQL92 filter: grammar, typing and evaluation.

Every expected answer below was worked out by hand from RocketMQ 5.x's SelectorParser.jj
(the generated SelectorParser.java) and its expression classes (ComparisonExpression,
LogicExpression, UnaryExpression, ConstantExpression), or copied from RocketMQ's own
ParserTest / ExpressionTest.  ``None`` is RocketMQ's NULL (unknown) result; ``RAISES`` marks
an evaluation where RocketMQ throws (the broker then treats the message as not matching).
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.filter import Filter, FilterEvaluationError, FilterSyntaxError, compile

RAISES = "raises"


def ev(expr: str, props: dict | None = None):
    """RocketMQ's result for `expr` on a message with `props`: True/False/None or RAISES."""
    f = compile(expr)
    try:
        result = f.evaluate(props or {})
    except FilterEvaluationError:
        assert f.matches(props or {}) is False
        return RAISES
    assert f.matches(props or {}) is (result is True)
    return result


def syntax_error(expr: str) -> FilterSyntaxError:
    with pytest.raises(FilterSyntaxError) as info:
        compile(expr)
    return info.value


# ---------------------------------------------------------------------------------------
# RocketMQ ParserTest
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        "a=3 and b<>4 And c>5 AND d<=4",
        "a=3  and    b<>4 And c>5 AND d<=4",
        "a=3 or b<>4 Or c>5 OR d<=4",
        "a in ('3', '4', '5')",
        "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
        "(a between 2 and 10) AND (b not between 6 and 9)",
        "a is null",
        "a is not null",
        "a <= now",  # `now` is just a property name in the 5.x grammar
        "a=3 and b contains 'xxx' and c not contains 'xxx'",
    ],
)
def test_parser_test_valid(expr):
    f = compile(expr)
    assert isinstance(f, Filter)
    assert f.expression == expr


def test_parser_test_invalid():
    e = syntax_error("a and between 2 and 10")
    assert (e.line, e.column) == (1, 7)


def test_parser_test_decimal_overflow():
    syntax_error("a > 100000000000000000000000")


def test_parser_test_float_overflow():
    digits = "1" + "1" * 51 * 2048
    syntax_error(f"a > {digits}.{digits}")


def test_parser_test_illegal_between():
    syntax_error(" a between 10 and 0")


# ---------------------------------------------------------------------------------------
# RocketMQ ExpressionTest (the cases whose property values are strings)
# ---------------------------------------------------------------------------------------

AND_EXPR = "a=3 and b<>4 And c>5 AND d<=4"
OR_EXPR = "a=3 or b<>4 Or c>5 OR d<=4"


@pytest.mark.parametrize("op", ["contains 'x'", "startswith 'ax'", "endswith 'xb'"])
def test_expression_test_string_ops(op):
    assert ev(f"value {op}", {"value": "axb"}) is True
    assert ev(f"value not {op}", {"value": "axb"}) is False


@pytest.mark.parametrize("op", ["contains", "startswith", "endswith"])
def test_expression_test_string_ops_miss_empty_null(op):
    assert ev(f"value {op} 'x'", {"value": "abb"}) is False
    assert ev(f"value not {op} 'x'", {"value": "abb"}) is True
    # empty search string: FALSE both ways
    assert ev(f"value {op} ''", {"value": "axb"}) is False
    assert ev(f"value not {op} ''", {"value": "axb"}) is False
    # missing property: FALSE both ways (not NULL)
    assert ev(f"value {op} 'x'", {}) is False
    assert ev(f"value not {op} 'x'", {}) is False
    # string literal on the left
    assert ev(f"'axb' {op} 'u'") is False
    assert ev(f"'axb' not {op} 'u'") is True
    assert ev(f"' ' {op} ' '") is True
    assert ev(f"' ' not {op} ' '") is False
    assert ev(f"'axb' {op} '.'") is False
    assert ev(f"'axb' not {op} '.'") is True
    assert ev(f"'s' {op} '\\'") is False


def test_expression_test_string_literal_left():
    assert ev("'axb' contains 'x'") is True
    assert ev("'axb' startswith 'ax'") is True
    assert ev("'axb' endswith 'xb'") is True
    assert ev("'axb' not contains 'x'") is False


@pytest.mark.parametrize(
    "expr",
    [
        "value contains x",
        "value not contains x",
        "value contains 123",
        "value not contains 123",
        "'axb' contains ",
        "'axb' not contains ",
    ],
)
def test_expression_test_string_ops_need_string_literal(expr):
    syntax_error(expr)


@pytest.mark.parametrize("op", ["contains", "startswith", "endswith"])
def test_expression_test_all_in_one(op):
    expr = f"a not in ('4', '4', '5') and b between 3 and 10 and c not {op} 'axbc'"
    assert ev(expr, {"a": "3", "b": "3", "c": "axbdc"}) is True


def test_expression_test_string_has_string():
    assert ev("TAGS is not null and TAGS='''''tag'''''", {"TAGS": "''tag''"}) is True


def test_expression_test_string_compare():
    assert ev("a between up and low", {"a": "3.14"}) is None
    assert ev("a between up and low", {"a": "3.14", "up": "up", "low": "low"}) is RAISES
    assert ev("key is not null and key between 0 and 100", {"key": "con"}) is RAISES
    assert ev("a between 0 and 100", {"a": "abc"}) is RAISES
    assert ev("a=b", {"a": "3.14", "b": "3.14"}) is True
    assert ev("a<>b", {"a": "3.14", "b": "3.14"}) is False
    assert ev("a<>b", {"a": "3.14", "b": "3.141"}) is True


def test_expression_test_numbers():
    assert ev("a > 3.1E10", {"a": "3.1415E10"}) is True
    assert ev("a > 3.14", {"a": "3.1415"}) is True
    assert ev("a > b", {"a": "10", "b": "20"}) is False
    assert ev("a > b", {"a": "20", "b": "10"}) is True


def test_expression_test_null_or_boolean_equal():
    e = "a is null OR a='hello'"
    assert ev(e, {}) is True
    assert ev(e, {"a": "hello"}) is True
    assert ev(e, {"a": "abc"}) is False
    e = "a=TRUE OR b=FALSE"
    assert ev(e, {"a": "true", "b": "false"}) is True
    assert ev(e, {"a": "false", "b": "true"}) is False
    e = "a is not null and a='hello'"
    assert ev(e, {"a": "hello"}) is True
    assert ev(e, {}) is False


def test_expression_test_and_or():
    assert ev(AND_EXPR, {"a": "3", "b": "5", "c": "6", "d": "1"}) is True
    assert ev(AND_EXPR, {"a": "4", "b": "5", "c": "6", "d": "1"}) is False
    assert ev(OR_EXPR, {"a": "3"}) is True
    assert ev(OR_EXPR, {"a": "4", "b": "5"}) is True
    assert ev(OR_EXPR, {"a": "4", "b": "4", "c": "6"}) is True
    assert ev(OR_EXPR, {"a": "4", "b": "4", "c": "3", "d": "2"}) is True
    assert ev(OR_EXPR, {"a": "4", "b": "4", "c": "3", "d": "10"}) is False


def test_expression_test_in_between_null():
    for v in ("3", "4", "5"):
        assert ev("a in ('3', '4', '5')", {"a": v}) is True
        assert ev("a not in ('3', '4', '5')", {"a": v}) is False
    assert ev("a in ('3', '4', '5')", {"a": "8"}) is False
    assert ev("a not in ('3', '4', '5')", {"a": "8"}) is True
    for v in ("2", "10", "3"):
        assert ev("a between 2 and 10", {"a": v}) is True
        assert ev("a not between 2 and 10", {"a": v}) is False
    for v in ("1", "11"):
        assert ev("a between 2 and 10", {"a": v}) is False
        assert ev("a not between 2 and 10", {"a": v}) is True
    assert ev("a is null", {"abc": "2"}) is True
    assert ev("a is null", {"a": "2"}) is False
    assert ev("a is not null", {"a": "2"}) is True
    assert ev("a is not null", {"abc": "2"}) is False


# ---------------------------------------------------------------------------------------
# Tokens and literals
# ---------------------------------------------------------------------------------------


def test_keywords_ignore_case_but_names_do_not():
    assert ev("a Is NoT nUlL aNd b BeTwEeN 1 AnD 2 oR FaLsE", {"a": "x", "b": "1"}) is True
    assert ev("TAGS = 'x'", {"tags": "x"}) is None
    assert ev("TAGS = 'x'", {"TAGS": "x"}) is True
    assert ev("$a_1 = '1' AND _b$ = '2'", {"$a_1": "1", "_b$": "2"}) is True
    # a keyword followed by name characters is a name
    assert ev("notes = 'x' AND order = 'y' AND isx IS NULL", {"notes": "x", "order": "y"}) is True


def test_decimal_literals():
    assert ev("a = 5L", {"a": "5"}) is True
    assert ev("a = 5l", {"a": "5"}) is True
    # Integer literal: the property is read with Integer.valueOf
    assert ev("a = 5", {"a": "3000000000"}) is RAISES
    assert ev("a > 2147483647", {"a": "2147483648"}) is RAISES
    # a literal beyond 32 bits is a Long: Long.valueOf
    assert ev("a = 3000000000", {"a": "3000000000"}) is True
    assert ev("a > 2147483648", {"a": "2147483649"}) is True
    assert ev("a = 9223372036854775807", {"a": "9223372036854775807"}) is True
    syntax_error("a = 9223372036854775808")
    syntax_error("a = -9223372036854775808")  # the literal overflows before the minus


def test_float_literals():
    assert ev("a > .5", {"a": ".75"}) is True
    assert ev("a > 5.", {"a": "6"}) is True
    assert ev("a = 5e3", {"a": "5000"}) is True
    assert ev("a = 5E+3", {"a": "5000.0"}) is True
    assert ev("a < 1.5e-3", {"a": "0.001"}) is True
    assert ev("a > 4.9e-324", {"a": "1"}) is True
    syntax_error("a > 1e400")  # infinite
    # ConstantExpression.createFloat rejects values below Double.MIN_VALUE: 0.0 too
    for expr in ("a > 0.0", "a > .0", "a > 0e0", "a > 1e-400"):
        e = syntax_error(expr)
        assert (e.line, e.column) == (1, 5)
    assert ev("a > 0", {"a": "1"}) is True


def test_string_literals():
    assert ev("a = 'it''s'", {"a": "it's"}) is True
    assert ev("a = ''''", {"a": "'"}) is True
    assert ev("a = ''", {"a": ""}) is True
    assert ev("a = 'two\nlines'", {"a": "two\nlines"}) is True
    assert ev("a = 'caf\u00e9 \u6f22\u5b57'", {"a": "caf\u00e9 \u6f22\u5b57"}) is True


def test_no_hex_or_octal_literals():
    # "0x1F" lexes as 0 then the name x1F, "010" as 0 then 10; the parser stops after "a = 0"
    assert ev("a = 0x1F", {"a": "0"}) is True
    assert ev("a = 0x1F", {"a": "31"}) is False
    assert ev("a = 010", {"a": "0"}) is True
    assert ev("a = 0L", {"a": "0"}) is True  # "0" takes no L suffix


def test_comments():
    assert ev("a = '1' /* note */ AND b = '2'", {"a": "1", "b": "2"}) is True
    assert ev("-- leading comment\na = '1'", {"a": "1"}) is True
    assert ev("a = '1' -- c\r\n AND b = '2'", {"a": "1", "b": "3"}) is False
    e = syntax_error("a = '1' /* open")
    assert (e.line, e.column) == (1, 9)


def test_trailing_text_is_ignored_like_rocketmq():
    # JmsSelector() has no <EOF>: parsing stops at the longest expression
    assert ev("a = '1' b = '2'", {"a": "1", "b": "x"}) is True
    assert ev("a = '1')", {"a": "1"}) is True
    assert ev("a + 1", {"a": "x"}) is False  # only `a` is read: a string is not TRUE
    assert ev("a = '1' -- no newline", {"a": "1"}) is True
    # ...but the parser does look at the next token
    e = syntax_error("a = '1' #")
    assert (e.line, e.column) == (1, 9)
    syntax_error("a = '1' not")
    syntax_error("a = '1' not x")
    syntax_error("a = '1' is x")
    syntax_error("a = '1' and")


# ---------------------------------------------------------------------------------------
# NULL, booleans and three-valued logic
# ---------------------------------------------------------------------------------------


def test_null_comparisons():
    assert ev("a = 1", {}) is None
    assert ev("a <> 1", {}) is None
    assert ev("a > 1", {}) is None
    assert ev("a between 1 and 2", {}) is None
    assert ev("a not between 1 and 2", {}) is None
    assert ev("a in ('x')", {}) is None
    assert ev("a not in ('x')", {}) is None
    assert ev("NOT (a = 1)", {}) is None
    assert ev("a = b", {}) is True  # both null: equal
    assert ev("a = b", {"a": "x"}) is False
    assert ev("a = b", {"b": "x"}) is None
    assert ev("a IS NULL", {"a": ""}) is False


def test_three_valued_logic():
    assert ev("a = '1' OR TRUE", {}) is True
    assert ev("a = '1' OR FALSE", {}) is None
    assert ev("a = '1' AND FALSE", {}) is False
    assert ev("a = '1' AND TRUE", {}) is None
    assert ev("FALSE AND a = '1'", {}) is False
    assert ev("TRUE OR a > 1", {"a": "x"}) is True  # short circuit: a > 1 never runs
    assert ev("a > 1 OR TRUE", {"a": "x"}) is RAISES
    assert ev("FALSE AND a > 1", {"a": "x"}) is False
    assert ev("a = '1' AND b = '1' AND c = '1'", {"a": "1", "c": "1"}) is None
    assert ev("a = '1' AND b = '1' AND c = '1'", {"a": "1", "c": "2"}) is False
    assert ev("a = '1' OR b = '1' OR c = '1'", {"c": "2"}) is None
    assert ev("a = '1' OR b = '1' OR c = '1'", {"a": "0", "b": "0", "c": "0"}) is False


def test_constant_selectors():
    assert ev("TRUE") is True
    assert ev("FALSE") is False
    assert ev("NULL") is None
    assert ev("NOT NULL") is None
    assert ev("NOT FALSE") is True
    assert ev("NULL IS NULL") is True
    assert ev("NULL IS NOT NULL") is False
    assert ev("1 = 1") is True
    assert ev("(TRUE)") is True


def test_bare_property_is_a_boolean_cast():
    # a property value is a String, never a Boolean: FALSE when present, NULL when missing
    assert ev("a", {"a": "true"}) is False
    assert ev("a", {}) is None
    assert ev("NOT a", {"a": "x"}) is True
    assert ev("NOT a", {}) is None
    assert ev("(a)", {"a": "true"}) is False
    assert ev("a AND TRUE", {"a": "true"}) is False


def test_not_binds_tighter_than_comparisons():
    # NOT a = 1 is (NOT a) = 1: a Boolean against an Integer, never equal
    assert ev("NOT a = 1", {"a": "1"}) is False
    assert ev("NOT a = 1", {"a": "2"}) is False
    assert ev("NOT a = 1", {}) is None
    assert ev("NOT a = TRUE", {"a": "x"}) is True
    # (NOT a) is boolean, so ordering it is a parse error
    syntax_error("NOT a > 1")
    syntax_error("NOT a BETWEEN 1 AND 2")
    syntax_error("NOT a IN ('x')")
    assert ev("NOT a CONTAINS 'x'", {"a": "x"}) is False  # a Boolean contains nothing
    assert ev("NOT (a > 1)", {"a": "0"}) is True
    assert ev("NOT (a > 1)", {"a": "5"}) is False
    assert ev("NOT NOT (a = '1')", {"a": "1"}) is True
    assert ev("NOT (a CONTAINS 'x')", {}) is True  # CONTAINS gives FALSE, not NULL


def test_precedence():
    e = "a = '1' OR b = '1' AND c = '1'"
    assert ev(e, {"a": "1", "b": "0", "c": "0"}) is True
    assert ev(e, {"a": "0", "b": "1", "c": "0"}) is False
    e = "(a = '1' OR b = '1') AND c = '1'"
    assert ev(e, {"a": "1", "c": "0"}) is False
    # comparisons bind tighter than equality: (a > 1) = (b > 2)
    assert ev("a > 1 = b > 2", {"a": "2", "b": "3"}) is True
    assert ev("a > 1 = b > 2", {"a": "2", "b": "1"}) is False
    assert ev("a = 1 = TRUE", {"a": "1"}) is True
    assert ev("a = 1 = TRUE", {"a": "2"}) is False
    assert ev("a IS NULL = TRUE", {}) is True
    assert ev("a > 1 = TRUE", {"a": "5"}) is True
    assert ev("a between 1 and 2 and b = '1'", {"a": "1", "b": "1"}) is True
    assert ev("a = '1' and b between 1 and 2", {"a": "1", "b": "2"}) is True


# ---------------------------------------------------------------------------------------
# Type coercion
# ---------------------------------------------------------------------------------------


def test_property_against_integer():
    assert ev("a > 5", {"a": "10"}) is True
    assert ev("a > 5", {"a": "+6"}) is True
    assert ev("a > 5", {"a": "-6"}) is False
    assert ev("a > 5", {"a": "5.5"}) is RAISES  # Integer.valueOf("5.5")
    assert ev("a > 5", {"a": " 6"}) is RAISES  # Integer.valueOf does not trim
    assert ev("a > 5", {"a": "abc"}) is RAISES
    assert ev("a > 5", {"a": ""}) is RAISES
    assert ev("a = 5", {"a": "05"}) is True
    assert ev("a >= 5", {"a": "5"}) is True
    assert ev("a <= 5", {"a": "5"}) is True
    assert ev("a < 5", {"a": "5"}) is False
    assert ev("5 < a", {"a": "6"}) is True
    assert ev("a = 1", {"a": "1.0"}) is RAISES


def test_property_against_double():
    assert ev("a > 5.0", {"a": " 6 "}) is True  # Double.valueOf trims
    assert ev("a > 5.0", {"a": "6d"}) is True
    assert ev("a > 5.0", {"a": "6F"}) is True
    assert ev("a > 5.0", {"a": "0x1p4"}) is True  # 16.0
    assert ev("a > 5.0", {"a": "1e1"}) is True
    assert ev("a > 5.0", {"a": "Infinity"}) is True
    assert ev("a > 5.0", {"a": "-Infinity"}) is False
    # Double.compareTo puts NaN above everything
    assert ev("a > 5.0", {"a": "NaN"}) is True
    assert ev("a < 5.0", {"a": "NaN"}) is False
    assert ev("a > 5.0", {"a": "inf"}) is RAISES
    assert ev("a > 5.0", {"a": "1_0"}) is RAISES
    assert ev("a > 5.0", {"a": "0x10"}) is RAISES  # hex needs a p exponent
    assert ev("a = 1.0", {"a": "1"}) is True
    assert ev("1.0 = 1") is True
    assert ev("a = 1.5", {"a": "abc"}) is RAISES


def test_two_properties():
    # = compares the strings; > & co parse both as doubles
    assert ev("a = b", {"a": "1", "b": "1.0"}) is False
    assert ev("a > b", {"a": "1", "b": "1.0"}) is False
    assert ev("a >= b", {"a": "1", "b": "1.0"}) is True
    assert ev("a < b", {"a": "x", "b": "1"}) is RAISES


def test_booleans():
    assert ev("a = TRUE", {"a": "TRUE"}) is True  # Boolean.valueOf ignores case
    assert ev("a = TRUE", {"a": "yes"}) is False
    assert ev("a = FALSE", {"a": "yes"}) is True
    assert ev("a <> TRUE", {"a": "true"}) is False
    # Boolean on the left of a String: RocketMQ's conversion throws (ClassCastException)
    assert ev("TRUE = a", {"a": "true"}) is RAISES
    assert ev("TRUE = a", {}) is False
    assert ev("'true' = TRUE") is True
    assert ev("1 = TRUE") is False
    assert ev("TRUE = FALSE") is False


def test_literal_equality():
    assert ev("'a' = 'a'") is True
    assert ev("'a' = 'b'") is False
    assert ev("'a' = 1") is RAISES
    assert ev("1 = 'a'") is RAISES
    assert ev("1 = '1'") is True
    assert ev("'1' = 1") is True
    assert ev("3000000000 = 3000000000") is True
    assert ev("1 = 1.5") is False


def test_unary_minus_and_plus():
    assert ev("a >= -1", {"a": "-1"}) is True
    assert ev("a > -2147483648", {"a": "-2147483648"}) is False
    assert ev("a >= -2147483648", {"a": "-2147483648"}) is True
    assert ev("a = - -5", {"a": "5"}) is True
    assert ev("a > +5", {"a": "6"}) is True
    assert ev("a = -1.5", {"a": "-1.5"}) is True
    # minus on a non-number is NULL
    assert ev("-a IS NULL", {"a": "5"}) is True
    assert ev("-'x' IS NULL") is True
    assert ev("a = -b", {"a": "1", "b": "1"}) is False
    assert ev("a = -b", {}) is True  # NULL = NULL
    assert ev("-a = 1", {"a": "-1"}) is None
    # negative bounds are not literals: no order check, the range is just empty
    assert ev("a between -5 and -10", {"a": "-7"}) is False
    assert ev("a between -10 and -5", {"a": "-7"}) is True


def test_between_bounds():
    assert ev("a between 1 and 2.5", {"a": "2.5"}) is RAISES  # a is read as Integer for 1
    assert ev("a between 1.0 and 2.5", {"a": "2.5"}) is True
    assert ev("a between 1 and 1", {"a": "1"}) is True
    assert ev("a between 1 and 10", {"a": "10"}) is True
    assert ev("a not between 1 and 10", {"a": "0"}) is True
    # unary plus keeps a literal a literal, so the order check applies
    syntax_error("a between +2 and 1")
    assert ev("a not between 2 and 1", {"a": "5"}) is True  # no order check for NOT BETWEEN


# ---------------------------------------------------------------------------------------
# What RocketMQ rejects at parse time
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr,line,column",
    [
        ("a > 'x'", 1, 5),  # strings cannot be ordered
        ("'x' < a", 1, 1),
        ("a >= TRUE", 1, 6),
        ("a < NULL", 1, 5),
        ("a > 1 > 2", 1, 1),  # (a > 1) is boolean
        ("a <= (b = 1)", 1, 6),
        ("a between 'a' and 'b'", 1, 11),
        ("a not between 1 and 'b'", 1, 21),
        ("a between 1 and NULL", 1, 17),
        ("a between TRUE and 2", 1, 11),
        ("a between 2.5 and 1", 1, 11),
        ("a = NULL", 1, 5),  # use IS NULL
        ("NULL = a", 1, 1),
        ("a <> NULL", 1, 6),
        ("TRUE = 'true'", 1, 1),
        ("FALSE <> 1", 1, 1),
        ("a in (1, 2)", 1, 7),
        ("a in ()", 1, 7),
        ("'x' in ('x')", 1, 1),
        ("a = 1 in ('x')", 1, 5),  # a = (1 IN ...): IN binds tighter
        ("'abc'", 1, 1),  # the selector must be boolean
        ("5", 1, 1),
        ("-a", 1, 1),
        ("a AND 'x'", 1, 7),
        ("NOT 5", 1, 5),
        ("", 1, 1),
        ("   ", 1, 4),
        ("a == 1", 1, 4),
        ("a != 1", 1, 3),
        ("a = 'open", 1, 5),
        ("a = 1 AND\n  b >", 2, 6),
        ("a = 1 AND\r\n  b >", 2, 6),
        ("(a = 1", 1, 7),
        ("a = \u00e9", 1, 5),  # names are ASCII
    ],
)
def test_rejected(expr, line, column):
    e = syntax_error(expr)
    assert isinstance(e, ValueError)
    assert (e.line, e.column) == (line, column), str(e)
    src_line = expr.replace("\r\n", "\n").split("\n")[line - 1]
    assert e.pointer == src_line + "\n" + " " * (column - 1) + "^"
    assert str(e).endswith(e.pointer)
    assert e.expression == expr


def test_like_is_not_an_operator():
    # LIKE was removed from RocketMQ's grammar: `a LIKE 'x%'` reads as the bare property `a`
    assert ev("a LIKE 'x%'", {"a": "xy"}) is False
    assert ev("a = '1' OR b LIKE 'x%'", {"a": "1"}) is True


def test_error_message_names_the_problem():
    assert "cannot be compared" in str(syntax_error("a > 'x'"))
    assert "IS NULL" in str(syntax_error("a = NULL"))
    assert "boolean" in str(syntax_error("'abc'"))
    assert "unexpected" in str(syntax_error("a and between 2 and 10"))


# ---------------------------------------------------------------------------------------
# API
# ---------------------------------------------------------------------------------------


def test_property_names_and_expression():
    text = "a = 1 AND (b IS NULL OR c IN ('x')) AND 'k' = d AND NOT e AND TAGS CONTAINS 't'"
    f = compile(text)
    assert f.property_names == frozenset({"a", "b", "c", "d", "e", "TAGS"})
    assert f.expression == text
    assert compile("TRUE").property_names == frozenset()


def test_matches_accepts_none_and_any_mapping():
    f = compile("a IS NULL")
    assert f.matches(None) is True
    assert f.evaluate(None) is True

    class Props(dict):
        pass

    assert compile("a = 'x'").matches(Props(a="x")) is True


def test_evaluation_error_type():
    with pytest.raises(FilterEvaluationError):
        compile("a > 5").evaluate({"a": "five"})
    assert compile("a > 5").matches({"a": "five"}) is False


def test_compile_rejects_non_strings():
    with pytest.raises(TypeError):
        compile(b"a = 1")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------

INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)


def lit(n: int) -> str:
    return str(n) if n >= 0 else f"-{-n}"


@given(x=INT32, c=INT32)
def test_integer_comparisons_agree_with_python(x, c):
    p = {"a": str(x)}
    assert compile(f"a > {lit(c)}").matches(p) is (x > c)
    assert compile(f"a >= {lit(c)}").matches(p) is (x >= c)
    assert compile(f"a < {lit(c)}").matches(p) is (x < c)
    assert compile(f"a <= {lit(c)}").matches(p) is (x <= c)
    assert compile(f"a = {lit(c)}").matches(p) is (x == c)
    assert compile(f"a <> {lit(c)}").matches(p) is (x != c)


@given(x=INT32, lo=INT32, hi=INT32)
def test_between_agrees_with_python(x, lo, hi):
    p = {"a": str(x)}
    between = f"a BETWEEN {lit(lo)} AND {lit(hi)}"
    if 0 <= hi < lo:
        # two plain literals in the wrong order: createBetween refuses them
        # (a negative bound is a minus expression, not a literal, and escapes the check)
        syntax_error(between)
    else:
        assert compile(between).matches(p) is (lo <= x <= hi)
    # createNotBetween has no such check
    assert compile(f"a NOT BETWEEN {lit(lo)} AND {lit(hi)}").matches(p) is (x < lo or x > hi)


@given(s=st.text())
def test_any_string_literal_round_trips(s):
    quoted = "'" + s.replace("'", "''") + "'"
    assert compile(f"a = {quoted}").matches({"a": s})
    assert compile(f"a IN ('zz', {quoted})").matches({"a": s})


# A small independent model: leaves are string tests on a, b, c whose values are
# missing, '1' or '2'; the model applies SQL three-valued logic (Kleene).
LEAVES = {
    "{v} = '1'": lambda v: None if v is None else v == "1",
    "{v} <> '1'": lambda v: None if v is None else v != "1",
    "{v} IS NULL": lambda v: v is None,
    "{v} IS NOT NULL": lambda v: v is not None,
    "{v} IN ('1')": lambda v: None if v is None else v == "1",
    "{v} CONTAINS '2'": lambda v: False if v is None else "2" in v,
    "{v} NOT CONTAINS '2'": lambda v: False if v is None else "2" not in v,
}


def k_not(x):
    return None if x is None else not x


def k_and(x, y):
    if x is False or y is False:
        return False
    if x is None or y is None:
        return None
    return True


def k_or(x, y):
    if x is True or y is True:
        return True
    if x is None or y is None:
        return None
    return False


leaf = st.tuples(st.sampled_from(sorted(LEAVES)), st.sampled_from("abc")).map(
    lambda t: (t[0].format(v=t[1]), lambda p, t=t: LEAVES[t[0]](p.get(t[1])))
)


def _combine(children):
    return st.one_of(
        children.map(lambda c: (f"NOT ({c[0]})", lambda p, c=c: k_not(c[1](p)))),
        st.tuples(children, children).map(
            lambda t: (f"({t[0][0]}) AND ({t[1][0]})", lambda p, t=t: k_and(t[0][1](p), t[1][1](p)))
        ),
        st.tuples(children, children).map(
            lambda t: (f"({t[0][0]}) OR ({t[1][0]})", lambda p, t=t: k_or(t[0][1](p), t[1][1](p)))
        ),
    )


exprs = st.recursive(leaf, _combine, max_leaves=8)
props = st.fixed_dictionaries({}, optional={k: st.sampled_from(["1", "2"]) for k in "abc"})


@given(e=exprs, p=props)
def test_logic_matches_three_valued_model(e, p):
    text, model = e
    assert compile(text).evaluate(p) is model(p)


@given(e1=exprs, e2=exprs, p=props)
def test_de_morgan_and_double_negation(e1, e2, p):
    a, b = e1[0], e2[0]
    assert compile(f"NOT (({a}) AND ({b}))").evaluate(p) is compile(f"NOT ({a}) OR NOT ({b})").evaluate(p)
    assert compile(f"NOT (({a}) OR ({b}))").evaluate(p) is compile(f"NOT ({a}) AND NOT ({b})").evaluate(p)
    v = compile(a).evaluate(p)
    if v is not None:
        assert compile(f"NOT ({a})").evaluate(p) is (not v)
    assert compile(f"NOT NOT ({a})").evaluate(p) is v
