"""JSON as RocketMQ's RemotingSerializable writes it with fastjson 1.2.x, and a reader for what fastjson writes.

Writing (`dumps`): a `Bean` is a Java object, written with its fields sorted by name (fastjson's default SortField)
and null fields left out; a plain dict is a Java Map, written in its own order with null values left out. Map keys
that are not strings (a HashMap<Long, String> such as BrokerData.brokerAddrs) are written unquoted, `{0:"addr"}`:
not valid JSON, but what fastjson writes by default and what RocketMQ's clients parse (the C++ core enables
jsoncpp's allowNumericKeys for it). `standard=True` is RocketMQ's "standard JSON" (BrowserCompatible +
QuoteFieldNames + MapSortField): every key quoted, map entries sorted by key, '/' and every character from 127
up escaped as \\uXXXX. Strings are escaped as fastjson's SerializeWriter does: \\b \\t \\n \\f \\r \\" \\\\ by a
backslash, the other control characters (and 127..159 in the default mode) as \\u00XX with upper-case hex digits.

Reading (`loads`): standard JSON plus fastjson's unquoted integer map keys."""

import json
import re

from .errors import RemotingProtocolError


class Bean(dict):
    """A Java bean: written with sorted field names, None fields omitted."""


_SHORT = {8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r", 34: '\\"', 92: "\\\\"}


def _escape_default(code: int) -> str | None:
    if code in _SHORT:
        return _SHORT[code]
    if code < 32 or 127 <= code < 160:
        return f"\\u{code:04X}"
    return None


def _escape_browser(code: int) -> str | None:
    if code in _SHORT:
        return _SHORT[code]
    if code == 47:
        return "\\/"
    if code < 32 or code >= 127:
        return f"\\u{code:04X}"
    return None


_DEFAULT_TABLE = {c: e for c in range(160) if (e := _escape_default(c)) is not None}
_NEEDS_DEFAULT = re.compile('[\x00-\x1f"\\\\\x7f-\x9f]')
_NEEDS_BROWSER = re.compile('[\x00-\x1f"/\\\\\x7f-\U0010ffff]')


def _utf16_units(ch: str) -> list[int]:
    code = ord(ch)
    if code < 0x10000:
        return [code]
    code -= 0x10000
    return [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]


def quote(text: str, standard: bool = False) -> str:
    """A JSON string literal as fastjson writes it (Java escapes UTF-16 code units, so an astral character
    becomes two \\uXXXX escapes in standard mode)."""
    if standard:
        if not _NEEDS_BROWSER.search(text):
            return '"' + text + '"'
        out = []
        for ch in text:
            for unit in _utf16_units(ch):
                esc = _escape_browser(unit)
                out.append(esc if esc is not None else chr(unit))
        return '"' + "".join(out) + '"'
    if not _NEEDS_DEFAULT.search(text):
        return '"' + text + '"'
    return '"' + text.translate(_DEFAULT_TABLE) + '"'


def _key(key, standard: bool) -> str:
    if isinstance(key, str):
        return quote(key, standard)
    if isinstance(key, bool) or not isinstance(key, int):
        raise TypeError(f"unsupported map key {key!r}")
    return f'"{key}"' if standard else str(key)


def _sort_key(key):
    # MapSortField sorts by the keys' natural order: numbers numerically, strings by their text
    return (0, key, "") if isinstance(key, int) else (1, 0, key)


def _write(value, standard: bool, out: list) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, str):
        out.append(quote(value, standard))
    elif isinstance(value, Bean):
        _write_entries(sorted((k, v) for k, v in value.items() if v is not None), standard, out)
    elif isinstance(value, dict):
        items = [(k, v) for k, v in value.items() if v is not None]
        if standard:
            items.sort(key=lambda kv: _sort_key(kv[0]))
        _write_entries(items, standard, out)
    elif isinstance(value, (list, tuple, set, frozenset)):
        out.append("[")
        for i, item in enumerate(sorted(value) if isinstance(value, (set, frozenset)) else value):
            if i:
                out.append(",")
            _write(item, standard, out)
        out.append("]")
    else:
        raise TypeError(f"cannot write {type(value).__name__} as fastjson")


def _write_entries(items, standard: bool, out: list) -> None:
    out.append("{")
    for i, (k, v) in enumerate(items):
        if i:
            out.append(",")
        out.append(_key(k, standard))
        out.append(":")
        _write(v, standard, out)
    out.append("}")


def dumps(value, standard: bool = False) -> str:
    out: list[str] = []
    _write(value, standard, out)
    return "".join(out)


def dumpb(value, standard: bool = False) -> bytes:
    return dumps(value, standard).encode("utf-8")


# a string literal (left as it is), or an unquoted integer object key (quoted before json.loads reads it)
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(?=\s*:)', re.S)


def _quote_bare_keys(m: re.Match) -> str:
    if m.group(1) is None:
        return m.group(0)
    return f'{m.group(1)}"{m.group(2)}"'


def loads(data: bytes | str):
    """Parse JSON written by fastjson (unquoted integer map keys come back as strings, as jsoncpp gives them)."""
    try:
        text = bytes(data).decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
        try:
            # valid JSON has no bare keys for the rewrite to quote: the common case skips the regex pass
            return json.loads(text)
        except ValueError:
            pass
        return json.loads(_TOKENS.sub(_quote_bare_keys, text))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise RemotingProtocolError(f"bad JSON: {e}") from None
