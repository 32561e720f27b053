"""RocketMQ's SQL92 message filter ("MessageSelector.bySql"), compiled to Python closures.

The language is the one RocketMQ 5.x's ``SelectorParser`` (filter module) accepts, and the
values are the ones its expression classes compute, including their quirks:

* Tokens: keywords NOT AND OR BETWEEN IN TRUE FALSE NULL IS CONTAINS STARTSWITH ENDSWITH
  (any letter case); identifiers ``[A-Za-z_$][A-Za-z0-9_$]*`` (case-sensitive property
  names); decimal literals ``0`` or ``[1-9][0-9]*`` with an optional ``l``/``L`` suffix
  (Integer when it fits 32 bits, else Long, overflowing 64 bits is an error); floating
  literals ``5.``, ``5.5``, ``.5`` with an optional exponent, or ``5E10`` (Double; infinite
  or zero values are rejected); strings in single quotes with ``''`` for a quote.  No
  hex/octal literals, no LIKE, no arithmetic.  ``-- ...`` up to a line end and
  ``/* ... */`` are comments.
* Precedence, loosest first: OR; AND; ``=`` ``<>`` ``IS [NOT] NULL``; ``>`` ``>=`` ``<``
  ``<=`` ``[NOT] BETWEEN`` ``[NOT] IN`` ``[NOT] CONTAINS|STARTSWITH|ENDSWITH``; unary
  ``+`` ``-`` ``NOT``.  NOT therefore binds tighter than a comparison: ``NOT a = 1`` means
  ``(NOT a) = 1``.
* Like RocketMQ, parsing stops after the longest expression it can read: text after it
  that cannot continue the expression is ignored (``a = 1 b`` is ``a = 1``).
* Parse-time type checks: ``>`` ``>=`` ``<`` ``<=`` and BETWEEN reject literal strings,
  TRUE/FALSE/NULL and boolean sub-expressions; ``=``/``<>`` reject a NULL literal and
  ``TRUE|FALSE = <string or number literal>``; BETWEEN with two literal bounds needs
  low <= high; IN needs a property on its left and string literals in the list;
  CONTAINS & co need a string literal on the right; AND/OR/NOT and the whole selector need
  a boolean (a bare property is allowed and reads as "false unless missing").
* Evaluation: property values are strings; a missing property is NULL.  Comparisons with
  NULL give NULL (unknown), AND/OR/NOT follow three-valued logic, and only TRUE matches.
  A property compared with a number literal is parsed like ``Integer.valueOf`` /
  ``Long.valueOf`` / ``Double.valueOf`` after the literal's type (so ``a > 5`` with
  ``a = '5.5'`` is an evaluation error); two properties compared with ``>`` & co are both
  parsed as doubles; ``=`` between two properties compares the strings.  Errors during
  evaluation make RocketMQ's broker drop the message from the filter: ``matches`` returns
  False, ``evaluate`` raises :class:`FilterEvaluationError`.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput
from lark.lexer import Lexer

from rocketstore.errors import RocketStoreError

__all__ = [
    "Filter",
    "FilterSyntaxError",
    "FilterEvaluationError",
    "compile",
]


class FilterSyntaxError(RocketStoreError, ValueError):
    """An expression RocketMQ refuses to compile: bad syntax or a type error found while parsing.

    ``line`` and ``column`` are 1-based and count characters; ``pointer`` is the offending
    source line with a caret under the column.
    """

    def __init__(self, reason: str, expression: str, line: int, column: int):
        self.reason = reason
        self.expression = expression
        self.line = line
        self.column = column
        lines = _LINE_BREAK_RE.split(expression)
        src = lines[line - 1] if 0 < line <= len(lines) else ""
        self.pointer = src + "\n" + " " * max(column - 1, 0) + "^"
        super().__init__(f"{reason} (line {line}, column {column})\n{self.pointer}")


class FilterEvaluationError(RocketStoreError, RuntimeError):
    """Evaluating a filter against one message failed the way RocketMQ's evaluation throws."""


class _EvalError(Exception):
    """Raised inside compiled closures; turned into FilterEvaluationError at the API edge."""


# ---------------------------------------------------------------------------------------
# Lexer (JavaCC longest-match rules of SelectorParser.jj, ASCII only)
# ---------------------------------------------------------------------------------------

_KEYWORDS = {
    "not": "NOT",
    "and": "AND",
    "or": "OR",
    "between": "BETWEEN",
    "in": "IN",
    "true": "TRUE",
    "false": "FALSE",
    "null": "NULL",
    "is": "IS",
    "contains": "CONTAINS",
    "startswith": "STARTSWITH",
    "endswith": "ENDSWITH",
}
_ID_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_FLOAT_RE = re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_DECIMAL_RE = re.compile(r"0|[1-9][0-9]*[lL]?")
_STRING_RE = re.compile(r"'(?:''|[^'])*'")
_LINE_COMMENT_RE = re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")
_BLOCK_COMMENT_RE = re.compile(r"/\*[^*]*\*+(?:[^/*][^*]*\*+)*/")
_WHITESPACE = " \t\n\r\f"
_OPERATORS = (
    ("<>", "NE"),
    ("<=", "LE"),
    (">=", "GE"),
    ("<", "LT"),
    (">", "GT"),
    ("=", "EQ"),
    ("(", "LPAR"),
    (")", "RPAR"),
    (",", "COMMA"),
    ("+", "PLUS"),
    ("-", "MINUS"),
)


class _LexError(Exception):
    def __init__(self, reason: str, pos: int):
        super().__init__(reason)
        self.reason = reason
        self.pos = pos


_LINE_BREAK_RE = re.compile(r"\r\n|\r|\n")


def _line_col(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of ``pos``; lines end at \\n, \\r or \\r\\n as in JavaCC."""
    line, start = 1, 0
    for m in _LINE_BREAK_RE.finditer(text, 0, pos):
        line += 1
        start = m.end()
    return line, pos - start + 1


def _skip_blank(text: str, i: int) -> int:
    """Past the white space and comments at i; an unterminated line comment stays (it lexes as "-" "-" ...)."""
    n = len(text)
    while i < n:
        if text[i] in _WHITESPACE:
            i += 1
            continue
        if text.startswith("--", i):
            m = _LINE_COMMENT_RE.match(text, i)
            if not m:
                return i
            i = m.end()
            continue
        if text.startswith("/*", i):
            m = _BLOCK_COMMENT_RE.match(text, i)
            if not m:
                raise _LexError("unterminated comment", i)
            i = m.end()
            continue
        return i
    return i


def _next_token(text: str, i: int) -> tuple[str, str]:
    """(kind, text) of the token starting at i, as SelectorParser.jj's token manager takes the longest match."""
    ch = text[i]
    if ch == "'":
        m = _STRING_RE.match(text, i)
        if not m:
            raise _LexError("unterminated string literal", i)
        return "STRING", m.group()
    if ch.isascii() and (ch.isdigit() or ch == "."):
        mf = _FLOAT_RE.match(text, i)
        md = _DECIMAL_RE.match(text, i)
        if mf and (not md or mf.end() > md.end()):
            return "FLOAT", mf.group()
        if md:
            return "DECIMAL", md.group()
        raise _LexError(f"unexpected character {ch!r}", i)
    m = _ID_RE.match(text, i)
    if m:
        word = m.group()
        return _KEYWORDS.get(word.lower(), "ID"), word
    for op, kind in _OPERATORS:
        if text.startswith(op, i):
            return kind, op
    raise _LexError(f"unexpected character {ch!r}", i)


def _tokenize(text: str):
    """Yield lark Tokens lazily, so a lexical error after the end of the expression that
    RocketMQ never looks at is not reported (mirrors JavaCC's on-demand token manager)."""
    starts = [0] + [m.end() for m in _LINE_BREAK_RE.finditer(text)]
    i = _skip_blank(text, 0)
    while i < len(text):
        kind, value = _next_token(text, i)
        line = bisect.bisect_right(starts, i)
        yield Token(kind, value, start_pos=i, line=line, column=i - starts[line - 1] + 1, end_pos=i + len(value))
        i = _skip_blank(text, i + len(value))


class _NoLexer(Lexer):
    """Lark needs a lexer class; tokens are fed by hand through the interactive parser."""

    def __init__(self, lexer_conf):  # noqa: D401 - lark API
        pass

    def lex(self, data):  # pragma: no cover - never used
        raise NotImplementedError


# ---------------------------------------------------------------------------------------
# Grammar (same productions as SelectorParser.jj; left recursion replaces JavaCC's loops)
# ---------------------------------------------------------------------------------------

_GRAMMAR = r"""
start: or_expr

?or_expr: and_expr
        | or_expr OR and_expr                     -> or_

?and_expr: eq_expr
         | and_expr AND eq_expr                   -> and_

?eq_expr: cmp_expr
        | eq_expr EQ cmp_expr                     -> eq
        | eq_expr NE cmp_expr                     -> ne
        | eq_expr IS NULL                         -> is_null
        | eq_expr IS NOT NULL                     -> is_not_null

?cmp_expr: unary
         | cmp_expr GT unary                      -> gt
         | cmp_expr GE unary                      -> ge
         | cmp_expr LT unary                      -> lt
         | cmp_expr LE unary                      -> le
         | cmp_expr CONTAINS STRING               -> contains
         | cmp_expr NOT CONTAINS STRING           -> not_contains
         | cmp_expr STARTSWITH STRING             -> startswith
         | cmp_expr NOT STARTSWITH STRING         -> not_startswith
         | cmp_expr ENDSWITH STRING               -> endswith
         | cmp_expr NOT ENDSWITH STRING           -> not_endswith
         | cmp_expr BETWEEN unary AND unary       -> between
         | cmp_expr NOT BETWEEN unary AND unary   -> not_between
         | cmp_expr IN LPAR string_list RPAR      -> in_
         | cmp_expr NOT IN LPAR string_list RPAR  -> not_in

string_list: STRING (COMMA STRING)*

?unary: primary
      | PLUS unary                                -> pos
      | MINUS unary                               -> neg
      | NOT unary                                 -> not_

?primary: literal
        | ID                                      -> prop
        | LPAR or_expr RPAR                       -> paren

literal: STRING | DECIMAL | FLOAT | TRUE | FALSE | NULL

%declare NOT AND OR BETWEEN IN TRUE FALSE NULL IS CONTAINS STARTSWITH ENDSWITH
%declare DECIMAL FLOAT STRING ID EQ NE GT GE LT LE LPAR RPAR COMMA PLUS MINUS
"""

_PARSER = Lark(_GRAMMAR, parser="lalr", lexer=_NoLexer, start="start")

_TOKEN_NAMES = {
    "NOT": "NOT",
    "AND": "AND",
    "OR": "OR",
    "BETWEEN": "BETWEEN",
    "IN": "IN",
    "TRUE": "TRUE",
    "FALSE": "FALSE",
    "NULL": "NULL",
    "IS": "IS",
    "CONTAINS": "CONTAINS",
    "STARTSWITH": "STARTSWITH",
    "ENDSWITH": "ENDSWITH",
    "DECIMAL": "a number",
    "FLOAT": "a number",
    "STRING": "a string literal",
    "ID": "a property name",
    "EQ": "'='",
    "NE": "'<>'",
    "GT": "'>'",
    "GE": "'>='",
    "LT": "'<'",
    "LE": "'<='",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "$END": "end of expression",
}


def _parse_tree(text: str) -> Tree:
    ip = _PARSER.parse_interactive()
    tokens = _tokenize(text)
    while True:
        try:
            tok = next(tokens)
        except StopIteration:
            tok = None
        except _LexError as e:
            # JavaCC lexes the token after a complete expression too (to see whether the
            # expression goes on), so a bad character there is an error as well
            line, col = _line_col(text, e.pos)
            raise FilterSyntaxError(e.reason, text, line, col) from None
        if tok is None:
            break
        trial = ip.copy()
        try:
            trial.feed_token(tok)
        except UnexpectedInput:
            if "$END" in ip.accepts():
                break  # RocketMQ stops at the longest expression and ignores the rest
            raise FilterSyntaxError(
                f"unexpected {_describe(tok)}; expected {_expected(ip)}", text, tok.line, tok.column
            ) from None
        ip = trial
    try:
        return ip.feed_eof()
    except UnexpectedInput:
        line, col = _line_col(text, len(text))
        raise FilterSyntaxError(f"unexpected end of expression; expected {_expected(ip)}", text, line, col) from None


def _describe(tok: Token) -> str:
    if tok.type in ("ID", "DECIMAL", "FLOAT", "STRING"):
        return f"{_TOKEN_NAMES[tok.type]} {tok.value!r}" if tok.type != "STRING" else f"string {tok.value}"
    return f"{tok.value!r}"


def _expected(ip) -> str:
    names = sorted({_TOKEN_NAMES.get(t, t) for t in ip.accepts()})
    return ", ".join(names)


# ---------------------------------------------------------------------------------------
# Java value semantics
# ---------------------------------------------------------------------------------------
# A value is None (null), bool (Boolean), str (String), int (Integer/Long) or float (Double).
# Every node knows statically which Java type its non-null values have ("tag"):
#   'I' Integer, 'L' Long, 'D' Double, 'S' String, 'Z' Boolean, None = always null.

_INT_MIN = {32: -(1 << 31), 64: -(1 << 63)}
_INT_MAX = {32: (1 << 31) - 1, 64: (1 << 63) - 1}


def _parse_java_int(s: str, bits: int) -> int:
    """Integer.valueOf / Long.valueOf: optional sign then decimal digits, no blanks."""
    body = s[1:] if s[:1] in ("+", "-") else s
    if not body or not body.isdecimal():
        raise _EvalError(f"NumberFormatException: For input string: {s!r}")
    try:
        v = int(body)
    except ValueError:  # very long digit strings
        raise _EvalError(f"NumberFormatException: For input string: {s!r}") from None
    if s[0] == "-":
        v = -v
    if not _INT_MIN[bits] <= v <= _INT_MAX[bits]:
        raise _EvalError(f"NumberFormatException: For input string: {s!r}")
    return v


def _parse_int32(s: str) -> int:
    return _parse_java_int(s, 32)


def _parse_int64(s: str) -> int:
    return _parse_java_int(s, 64)


_JAVA_DOUBLE_RE = re.compile(
    r"""[+-]?(?:
        NaN
      | Infinity
      | (?P<dec>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?
      | (?P<hex>0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?
    )""",
    re.VERBOSE,
)


def _java_trim(s: str) -> str:
    i, j = 0, len(s)
    while i < j and s[i] <= " ":
        i += 1
    while j > i and s[j - 1] <= " ":
        j -= 1
    return s[i:j]


def _parse_double(s: str) -> float:
    """Double.valueOf: Java's floating literal syntax, surrounding control/space chars trimmed."""
    t = _java_trim(s)
    m = _JAVA_DOUBLE_RE.fullmatch(t)
    if not m:
        raise _EvalError(f"NumberFormatException: For input string: {s!r}")
    neg = t[0] == "-"
    if m.group("dec") is not None:
        v = float(m.group("dec"))
    elif m.group("hex") is not None:
        v = float.fromhex(m.group("hex"))
    elif "NaN" in t:
        return math.nan
    else:
        v = math.inf
    return -v if neg else v


def _java_bool(s: str) -> bool:
    """Boolean.valueOf(String)."""
    return len(s) == 4 and s.lower() == "true"


def _double_bits(x: float) -> int:
    """Double.doubleToLongBits (every NaN collapses to the canonical one)."""
    if x != x:
        return 0x7FF8000000000000
    return struct.unpack(">q", struct.pack(">d", x))[0]


def _dcmp(a: float, b: float) -> int:
    if a < b:
        return -1
    if a > b:
        return 1
    # equal or NaN: Double.compareTo orders by the raw bits (-0.0 < 0.0, NaN above all)
    ka, kb = _double_bits(a), _double_bits(b)
    return (ka > kb) - (ka < kb)


def _icmp(a: int, b: int) -> int:
    return (a > b) - (a < b)


def _zcmp(a: bool, b: bool) -> int:
    return 0 if a == b else (1 if a else -1)


def _scmp(a: str, b: str) -> int:
    """String.compareTo: UTF-16 code unit order."""
    if a == b:
        return 0
    ea = a.encode("utf-16-be", "surrogatepass")
    eb = b.encode("utf-16-be", "surrogatepass")
    return -1 if ea < eb else 1


def _minus_one(a, b) -> int:
    return -1


def _class_cast(a, b) -> int:
    # ComparisonExpression casts the Boolean left value to String here.
    raise _EvalError("ClassCastException: Boolean cannot be cast to String")


def _compare_fn(lt: str, rt: str) -> Callable[[Any, Any], int]:
    """ComparisonExpression.__compare with string conversion on (RocketMQ always enables it)."""
    if lt == rt:
        return {"I": _icmp, "L": _icmp, "D": _dcmp, "S": _scmp, "Z": _zcmp}[lt]
    if lt == "Z":
        return _class_cast if rt == "S" else _minus_one
    if lt in ("I", "L"):
        parse = _parse_int32 if lt == "I" else _parse_int64
        if rt in ("I", "L"):
            return _icmp
        if rt == "D":
            return lambda a, b: _dcmp(float(a), b)
        if rt == "S":
            return lambda a, b: _icmp(a, parse(b))
        return _minus_one
    if lt == "D":
        if rt in ("I", "L"):
            return lambda a, b: _dcmp(a, float(b))
        if rt == "S":
            return lambda a, b: _dcmp(a, _parse_double(b))
        return _minus_one
    if lt == "S":
        if rt == "Z":
            return lambda a, b: _zcmp(_java_bool(a), b)
        if rt == "I":
            return lambda a, b: _icmp(_parse_int32(a), b)
        if rt == "L":
            return lambda a, b: _icmp(_parse_int64(a), b)
        if rt == "D":
            return lambda a, b: _dcmp(_parse_double(a), b)
    return _minus_one  # pragma: no cover


def _relational_compare_fn(lt: str, rt: str) -> Callable[[Any, Any], int]:
    """ComparisonExpression.evaluate for > >= < <=: two strings are compared as doubles."""
    if lt == "S" and rt == "S":

        def cmp(a: str, b: str) -> int:
            return _dcmp(_parse_double(a), _parse_double(b))

        return cmp
    return _compare_fn(lt, rt)


def _equals_fn(lt: str, rt: str) -> Callable[[Any, Any], bool]:
    """doCreateEqual for two non-null values: equals(), else compareTo() == 0."""
    if lt == rt:
        if lt == "D":
            return lambda a, b: _dcmp(a, b) == 0
        return lambda a, b: a == b
    cmp = _compare_fn(lt, rt)
    return lambda a, b: cmp(a, b) == 0


# ---------------------------------------------------------------------------------------
# Compilation to closures
# ---------------------------------------------------------------------------------------

Props = Mapping[str, str]


@dataclass(slots=True)
class _Node:
    fn: Callable[[Props], Any]
    tag: str | None  # Java type of non-null values, None: always null
    pos: tuple[int, int]  # line, column where it starts
    text: str  # for messages
    literal: bool = False  # a ConstantExpression in RocketMQ (incl. TRUE/FALSE/NULL)
    boolean: bool = False  # a BooleanExpression in RocketMQ
    prop: str | None = None  # a PropertyExpression's name
    const: bool = False  # value known at compile time and evaluation cannot fail
    value: Any = None


def _constant(value: Any, tag: str | None, pos, text, *, literal=False, boolean=False) -> _Node:
    return _Node(lambda p, _v=value: _v, tag, pos, text, literal=literal, boolean=boolean, const=True, value=value)


def _decode_string(image: str) -> str:
    return image[1:-1].replace("''", "'")


class _Compiler:
    def __init__(self, text: str):
        self.text = text
        self.names: set[str] = set()

    def fail(self, reason: str, pos: tuple[int, int]):
        raise FilterSyntaxError(reason, self.text, pos[0], pos[1])

    # -- helpers mirroring RocketMQ's construction-time checks ---------------------------

    def as_boolean(self, node: _Node) -> _Node:
        if node.boolean:
            return node
        if node.prop is not None:
            get = _getter(node.prop)

            def cast(p, _get=get):
                return None if _get(p) is None else False

            return _Node(cast, "Z", node.pos, node.text, boolean=True)
        self.fail(f"expression {node.text} will not result in a boolean value", node.pos)

    def check_less_than_operand(self, node: _Node, op: Token):
        if node.literal:
            if node.tag in ("I", "L", "D"):
                return
            self.fail(f"value {node.text} cannot be compared with {op.value!r}", node.pos)
        if node.boolean:
            self.fail(f"value {node.text} cannot be compared with {op.value!r}", node.pos)

    def check_equal(self, left: _Node, right: _Node, op: Token):
        for n in (left, right):
            if n.literal and n.value is None:
                self.fail(f"{n.text} cannot be compared with {op.value!r}; use IS NULL", n.pos)
        if left.literal and right.literal and left.boolean and not right.boolean:
            self.fail(f"{left.text} cannot be compared with {right.text}", left.pos)

    # -- node builders --------------------------------------------------------------------

    def build(self, t) -> _Node:
        if isinstance(t, Token):  # pragma: no cover - grammar always wraps tokens
            raise AssertionError(t)
        return getattr(self, "n_" + t.data)(t, *t.children)

    def n_start(self, t, child):
        return child if isinstance(child, _Node) else self.build(child)

    def n_literal(self, t, tok: Token):
        pos = (tok.line, tok.column)
        kind = tok.type
        if kind == "STRING":
            v = _decode_string(tok.value)
            return _constant(v, "S", pos, tok.value, literal=True)
        if kind == "DECIMAL":
            digits = tok.value[:-1] if tok.value[-1] in "lL" else tok.value
            if len(digits) > 19 or int(digits) > _INT_MAX[64]:
                self.fail(f"number {tok.value} is out of the range of a Java long", pos)
            v = int(digits)
            return _constant(v, "I" if v <= _INT_MAX[32] else "L", pos, tok.value, literal=True)
        if kind == "FLOAT":
            v = float(tok.value)
            if v == math.inf:
                self.fail(f"number {tok.value} is greater than the largest double", pos)
            if v < 5e-324:  # Double.MIN_VALUE: RocketMQ rejects 0.0 and underflows
                self.fail(f"number {tok.value} is less than Double.MIN_VALUE (4.9E-324)", pos)
            return _constant(v, "D", pos, tok.value, literal=True)
        if kind == "TRUE":
            return _constant(True, "Z", pos, "TRUE", literal=True, boolean=True)
        if kind == "FALSE":
            return _constant(False, "Z", pos, "FALSE", literal=True, boolean=True)
        return _constant(None, None, pos, "NULL", literal=True, boolean=True)  # NULL

    def n_prop(self, t, tok: Token):
        self.names.add(tok.value)
        return _Node(_getter(tok.value), "S", (tok.line, tok.column), tok.value, prop=tok.value)

    def n_paren(self, t, lpar, inner, rpar):
        node = self.build(inner)
        # RocketMQ returns the inner expression object itself: flags carry over.
        return _Node(
            node.fn,
            node.tag,
            (lpar.line, lpar.column),
            node.text,
            node.literal,
            node.boolean,
            node.prop,
            node.const,
            node.value,
        )

    def n_pos(self, t, plus, inner):
        node = self.build(inner)
        return _Node(
            node.fn,
            node.tag,
            (plus.line, plus.column),
            node.text,
            node.literal,
            node.boolean,
            node.prop,
            node.const,
            node.value,
        )

    def n_neg(self, t, minus, inner):
        node = self.build(inner)
        pos = (minus.line, minus.column)
        text = f"-{node.text}"
        if node.const:
            if node.tag in ("I", "L", "D"):
                v = -node.value
                return _Node(lambda p, _v=v: _v, node.tag, pos, text, const=True, value=v)
            return _Node(lambda p: None, None, pos, text, const=True, value=None)
        # numbers only come from literals, so a non-constant operand is never a number
        fn = node.fn

        def neg_null(p, _fn=fn):
            _fn(p)  # evaluated for its errors only; a non-number negates to NULL
            return None

        return _Node(neg_null, None, pos, text)

    def n_not_(self, t, op, inner):
        node = self.as_boolean(self.build(inner))
        pos = (op.line, op.column)
        text = f"NOT {node.text}"
        if node.const:
            v = None if node.value is None else (not node.value)
            return _Node(lambda p, _v=v: _v, "Z", pos, text, boolean=True, const=True, value=v)
        fn = node.fn

        def not_(p):
            v = fn(p)
            return None if v is None else (v is False)

        return _Node(not_, "Z", pos, text, boolean=True)

    def _logic(self, t, is_and: bool):
        # flatten the left-recursive chain: same evaluation order and short-circuits
        operands = []
        cur = t
        name = t.data
        while isinstance(cur, Tree) and cur.data == name:
            left, _op, right = cur.children
            operands.append(right)
            cur = left
        operands.append(cur)
        operands.reverse()
        nodes = []
        for o in operands:
            nodes.append(self.as_boolean(self.build(o)))
        fns = tuple(n.fn for n in nodes)
        word = " AND " if is_and else " OR "
        text = "(" + word.join(n.text for n in nodes) + ")"
        stop = False if is_and else True
        if len(fns) == 2:
            f1, f2 = fns
            fn = _and2(f1, f2) if is_and else _or2(f1, f2)
        else:

            def fn(p):
                unknown = False
                for f in fns:
                    v = f(p)
                    if v is stop:
                        return stop
                    if v is None:
                        unknown = True
                return None if unknown else (not stop)

        return _Node(fn, "Z", nodes[0].pos, text, boolean=True)

    def n_and_(self, t, *children):
        return self._logic(t, True)

    def n_or_(self, t, *children):
        return self._logic(t, False)

    # -- comparisons ----------------------------------------------------------------------

    def _equal(self, left: _Node, right: _Node, op: Token, negate: bool) -> _Node:
        self.check_equal(left, right, op)
        return self._do_equal(left, right, op, negate, f"{left.text} {op.value} {right.text}")

    def _do_equal(self, left: _Node, right: _Node, op, negate: bool, text: str) -> _Node:
        lf, rf = left.fn, right.fn
        pos = left.pos
        if left.tag is None or right.tag is None:
            # at least one side is always null
            if left.tag is None and right.tag is None:

                def eq(p):
                    lf(p)
                    rf(p)
                    return True
            elif left.tag is None:

                def eq(p):
                    lf(p)
                    return True if rf(p) is None else None
            else:

                def eq(p):
                    lv = lf(p)
                    rf(p)
                    return True if lv is None else False
        else:
            eqf = _equals_fn(left.tag, right.tag)
            if right.const and left.prop is not None:
                rv = right.value
                get = left.fn

                def eq(p):
                    lv = get(p)
                    if lv is None:
                        return None
                    return eqf(lv, rv)
            else:

                def eq(p):
                    lv = lf(p)
                    rv = rf(p)
                    if lv is None:
                        return True if rv is None else None
                    if rv is None:
                        return False
                    return eqf(lv, rv)

        if not negate:
            return _Node(eq, "Z", pos, text, boolean=True)

        def ne(p):
            v = eq(p)
            return None if v is None else (v is False)

        return _Node(ne, "Z", pos, text, boolean=True)

    def n_eq(self, t, left, op, right):
        return self._equal(self.build(left), self.build(right), op, False)

    def n_ne(self, t, left, op, right):
        return self._equal(self.build(left), self.build(right), op, True)

    def _is_null(self, left: _Node, negate: bool) -> _Node:
        lf = left.fn
        text = f"{left.text} IS {'NOT ' if negate else ''}NULL"
        if negate:
            return _Node(lambda p: lf(p) is not None, "Z", left.pos, text, boolean=True)
        return _Node(lambda p: lf(p) is None, "Z", left.pos, text, boolean=True)

    def n_is_null(self, t, left, is_, null):
        return self._is_null(self.build(left), False)

    def n_is_not_null(self, t, left, is_, not_, null):
        return self._is_null(self.build(left), True)

    def _relational(self, left: _Node, right: _Node, op: Token) -> _Node:
        self.check_less_than_operand(left, op)
        self.check_less_than_operand(right, op)
        test = {"GT": (lambda c: c > 0), "GE": (lambda c: c >= 0), "LT": (lambda c: c < 0), "LE": (lambda c: c <= 0)}[
            op.type
        ]
        text = f"{left.text} {op.value} {right.text}"
        lf, rf = left.fn, right.fn
        if left.tag is None:
            return _Node(lambda p: (lf(p), None)[1], "Z", left.pos, text, boolean=True)
        if right.tag is None:

            def always_null(p):
                if lf(p) is not None:
                    rf(p)
                return None

            return _Node(always_null, "Z", left.pos, text, boolean=True)
        cmp = _relational_compare_fn(left.tag, right.tag)
        if left.prop is not None and right.const:
            get, rv = lf, right.value
            # fast paths: property against an int literal is an exact int comparison
            if right.tag in ("I", "L"):
                parse = _parse_int32 if right.tag == "I" else _parse_int64
                pyop = {"GT": int.__gt__, "GE": int.__ge__, "LT": int.__lt__, "LE": int.__le__}[op.type]

                def rel(p):
                    lv = get(p)
                    if lv is None:
                        return None
                    return pyop(parse(lv), rv)
            else:

                def rel(p):
                    lv = get(p)
                    if lv is None:
                        return None
                    return test(cmp(lv, rv))
        else:

            def rel(p):
                lv = lf(p)
                if lv is None:
                    return None
                rv = rf(p)
                if rv is None:
                    return None
                return test(cmp(lv, rv))

        return _Node(rel, "Z", left.pos, text, boolean=True)

    def n_gt(self, t, left, op, right):
        return self._relational(self.build(left), self.build(right), op)

    n_ge = n_lt = n_le = n_gt

    def _between(self, value: _Node, low: _Node, high: _Node, op: Token, negate: bool) -> _Node:
        if not negate and low.literal and high.literal:
            if low.value is None or high.value is None:
                self.fail("the bounds of BETWEEN cannot be NULL", low.pos if low.value is None else high.pos)
            try:
                c = _compare_fn(high.tag, low.tag)(high.value, low.value)
            except _EvalError as e:
                self.fail(f"illegal BETWEEN bounds {low.text} and {high.text}: {e}", low.pos)
            if c < 0:
                self.fail(f"illegal BETWEEN bounds: {low.text} must be less than or equal to {high.text}", low.pos)
        t_ = lambda kind, v: Token(kind, v, line=op.line, column=op.column)  # noqa: E731
        if not negate:
            a = self._relational(value, low, t_("GE", ">="))
            b = self._relational(value, high, t_("LE", "<="))
        else:
            a = self._relational(value, low, t_("LT", "<"))
            b = self._relational(value, high, t_("GT", ">"))
        f1, f2 = a.fn, b.fn
        word = "NOT BETWEEN" if negate else "BETWEEN"
        text = f"{value.text} {word} {low.text} AND {high.text}"
        # BETWEEN is (value >= low AND value <= high); NOT BETWEEN (value < low OR value > high)
        fn = _or2(f1, f2) if negate else _and2(f1, f2)
        return _Node(fn, "Z", value.pos, text, boolean=True)

    def n_between(self, t, value, op, low, and_, high):
        return self._between(self.build(value), self.build(low), self.build(high), op, False)

    def n_not_between(self, t, value, not_, op, low, and_, high):
        return self._between(self.build(value), self.build(low), self.build(high), op, True)

    def _in(self, left: _Node, op: Token, strings: Tree, negate: bool) -> _Node:
        if left.prop is None:
            self.fail(f"expected a property on the left of {'NOT IN' if negate else 'IN'}, got {left.text}", left.pos)
        values = frozenset(_decode_string(s.value) for s in strings.children if s.type == "STRING")
        get = left.fn
        text = f"{left.text} {'NOT IN' if negate else 'IN'} (...)"
        if negate:

            def fn(p):
                v = get(p)
                return None if v is None else (v not in values)
        else:

            def fn(p):
                v = get(p)
                return None if v is None else (v in values)

        return _Node(fn, "Z", left.pos, text, boolean=True)

    def n_in_(self, t, left, op, lpar, strings, rpar):
        return self._in(self.build(left), op, strings, False)

    def n_not_in(self, t, left, not_, op, lpar, strings, rpar):
        return self._in(self.build(left), op, strings, True)

    def _string_test(self, left: _Node, lit: Token, kind: str, negate: bool) -> _Node:
        search = _decode_string(lit.value)
        text = f"{left.text} {'NOT ' if negate else ''}{kind.upper()} {lit.value}"
        if not search:  # RocketMQ answers FALSE without evaluating the left side
            return _Node(lambda p: False, "Z", left.pos, text, boolean=True, const=True, value=False)
        lf = left.fn
        if left.tag != "S":

            def fn(p):
                lf(p)
                return False

            return _Node(fn, "Z", left.pos, text, boolean=True)
        if kind == "contains":
            if negate:

                def fn(p):
                    v = lf(p)
                    return False if v is None else (search not in v)
            else:

                def fn(p):
                    v = lf(p)
                    return False if v is None else (search in v)
        else:
            method = str.startswith if kind == "startswith" else str.endswith
            if negate:

                def fn(p):
                    v = lf(p)
                    return False if v is None else (not method(v, search))
            else:

                def fn(p):
                    v = lf(p)
                    return False if v is None else method(v, search)

        return _Node(fn, "Z", left.pos, text, boolean=True)

    def n_contains(self, t, left, op, lit):
        return self._string_test(self.build(left), lit, "contains", False)

    def n_not_contains(self, t, left, not_, op, lit):
        return self._string_test(self.build(left), lit, "contains", True)

    def n_startswith(self, t, left, op, lit):
        return self._string_test(self.build(left), lit, "startswith", False)

    def n_not_startswith(self, t, left, not_, op, lit):
        return self._string_test(self.build(left), lit, "startswith", True)

    def n_endswith(self, t, left, op, lit):
        return self._string_test(self.build(left), lit, "endswith", False)

    def n_not_endswith(self, t, left, not_, op, lit):
        return self._string_test(self.build(left), lit, "endswith", True)


def _getter(name: str) -> Callable[[Props], Any]:
    def get(p):
        return p.get(name)

    return get


# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------


class Filter:
    """A compiled SQL92 filter.  Immutable and safe to share between threads."""

    __slots__ = ("expression", "property_names", "_fn")

    def __init__(self, expression: str, fn: Callable[[Props], Any], property_names: frozenset[str]):
        self.expression = expression
        self.property_names = property_names
        self._fn = fn

    def evaluate(self, properties: Props | None) -> bool | None:
        """RocketMQ's three-valued result (True, False or None for unknown).

        Raises FilterEvaluationError where RocketMQ's evaluation throws (for example a
        property that is not a number compared with a number)."""
        try:
            return self._fn(properties if properties is not None else {})
        except _EvalError as e:
            raise FilterEvaluationError(str(e)) from None

    def matches(self, properties: Props | None) -> bool:
        """True when the message with these properties passes the filter (the broker's answer:
        only a TRUE result matches; NULL and evaluation errors do not)."""
        try:
            return self._fn(properties if properties is not None else {}) is True
        except _EvalError:
            return False

    def __repr__(self) -> str:
        return f"Filter({self.expression!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Filter) and other.expression == self.expression

    def __hash__(self) -> int:
        return hash(self.expression)


@functools.lru_cache(maxsize=256)
def compile(expression: str) -> Filter:  # noqa: A001 - the natural name
    """Compile a RocketMQ SQL92 filter expression; raises FilterSyntaxError when RocketMQ would
    reject it at subscription time."""
    if not isinstance(expression, str):
        raise TypeError(f"expression must be a str, not {type(expression).__name__}")
    tree = _parse_tree(expression)
    comp = _Compiler(expression)
    try:
        # JmsSelector(): the whole selector must be boolean (a property is cast)
        node = comp.as_boolean(comp.build(tree))
    except RecursionError:
        raise FilterSyntaxError("expression is nested too deeply", expression, 1, 1) from None
    return Filter(expression, node.fn, frozenset(comp.names))


def _and2(f1, f2):
    """Three-valued AND of two compiled booleans (None is SQL's unknown): FALSE wins, then unknown."""

    def fn(p):
        a = f1(p)
        if a is False:
            return False
        b = f2(p)
        if b is False:
            return False
        if a is None or b is None:
            return None
        return True

    return fn


def _or2(f1, f2):
    """Three-valued OR: TRUE wins, then unknown."""

    def fn(p):
        a = f1(p)
        if a is True:
            return True
        b = f2(p)
        if b is True:
            return True
        if a is None or b is None:
            return None
        return False

    return fn
