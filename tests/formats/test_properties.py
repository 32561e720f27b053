"""Message properties: MessageDecoder.string2messageProperties / messageProperties2String / createCrc32, and the
CRC digit parsing of CommitLog.checkMessageAndReturnSize (Java int arithmetic)."""

import pytest
from hypothesis import given, strategies as st

from rocketstore.formats import properties as P

from . import _ref


@pytest.mark.parametrize(
    "raw,expected",
    [
        (b"", {}),
        (b"a\x01b\x02", {"a": "b"}),
        (b"a\x01b", {"a": "b"}),  # missing final \x02 is fine
        (b"a\x01b\x02c\x01d", {"a": "b", "c": "d"}),
        (b"\x01b\x02c\x01d\x02", {"c": "d"}),  # empty name dropped
        (b"a\x01\x02c\x01d\x02", {"c": "d"}),  # empty value dropped
        (b"a\x01", {}),
        (b"\x01\x02\x01\x02", {}),
        (b"\x02\x02a\x01b\x02\x02", {"a": "b"}),  # empty segments skipped
        (b"abc\x02d\x01e\x02", {"d": "e"}),  # a segment without \x01 is skipped
        (b"a\x01b\x01c\x02", {"a": "b\x01c"}),  # the first \x01 splits; the value keeps the rest
        (b"a\x01\x01\x02", {"a": "\x01"}),
        (b"a\x011\x02a\x012\x02", {"a": "2"}),  # HashMap.put: the last one wins
        (b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U\x02", {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U"}),
        ("ünicøde-名\x01значение ✓ 日本語 😀\x02".encode(), {"ünicøde-名": "значение ✓ 日本語 😀"}),
        ("😀\x01😀".encode(), {"😀": "😀"}),
        (b"k\x01v\x02\x01", {"k": "v"}),
    ],
)
def test_parse_properties_cases(raw, expected):
    assert P.parse_properties(raw) == expected
    assert P.parse_properties(raw.decode("utf-8")) == expected
    # the independent port of the Java method agrees with the expectation written by hand
    assert _ref.string2message_properties(raw.decode("utf-8")) == expected


def test_parse_properties_invalid_utf8_is_replaced_like_java():
    # new String(bytes, UTF_8) replaces malformed input with U+FFFD
    assert P.parse_properties(b"k\xff\x01v\xfe\x02") == {"k\ufffd": "v\ufffd"}


ALPHABET = st.sampled_from(["a", "b", "é", "名", "😀", "\x01", "\x02", " "])


@given(st.lists(ALPHABET, max_size=40).map("".join))
def test_parse_properties_matches_java_algorithm(s):
    assert P.parse_properties(s.encode("utf-8")) == _ref.string2message_properties(s)
    assert P.parse_properties(s) == _ref.string2message_properties(s)


@given(st.binary(max_size=200))
def test_parse_properties_random_bytes_match_java_algorithm(raw):
    assert P.parse_properties(raw) == _ref.string2message_properties(raw.decode("utf-8", "replace"))


TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x01\x02"), min_size=1, max_size=15)


@given(st.dictionaries(TEXT, TEXT, max_size=8), st.booleans())
def test_format_then_parse_round_trips(props, drop_last):
    s = P.format_properties(props)
    assert s == "".join(k + "\x01" + v + "\x02" for k, v in props.items())
    raw = s.encode("utf-8")
    if drop_last and raw:
        raw = raw[:-1]
    assert P.parse_properties(raw) == props


def test_format_properties():
    assert P.format_properties({}) == ""
    assert P.format_properties({"a": "1", "b": None, "c": "3"}) == "a\x011\x02c\x013\x02"
    assert P.format_properties({"TAGS": "标签"}) == "TAGS\x01标签\x02"


# ---- the appended CRC entry ------------------------------------------------------------------


@pytest.mark.parametrize(
    "crc,digits",
    [
        (0, "0000000000"),
        (1, "1000000000"),
        (123, "3210000000"),
        (1000000000, "0000000001"),
        (2147483647, "7463847412"),
        (1523578981, "1898753251"),
    ],
)
def test_crc32_property_literals(crc, digits):
    assert P.crc32_property(crc) == b"__CRC32#\x01" + digits.encode() + b"\x02"


@given(st.integers(0, 2**31 - 1))
def test_crc32_property_matches_reference(crc):
    entry = P.crc32_property(crc)
    assert len(entry) == 20 == P.CRC32_RESERVED_LEN
    assert entry == _ref.crc_entry(crc)
    assert P.parse_properties(b"x\x01y\x02" + entry) == {"x": "y", "__CRC32#": str(crc)[::-1].ljust(10, "0")}
    assert P.parse_crc32_digits(entry[9:19].decode()) == crc


def java_parse_digits(text: str) -> int:
    """CommitLog: for i from the last char down: expected *= 10; expected += charAt(i) - '0' (int)."""
    expected = 0
    for ch in reversed(text):  # BMP only: one char, one UTF-16 unit
        expected = _ref.java_int(expected * 10)
        expected = _ref.java_int(expected + ord(ch) - ord("0"))
    return expected


@pytest.mark.parametrize(
    "text,value",
    [
        ("", 0),
        ("0000000000", 0),
        ("3210000000", 123),
        ("7463847412", 2147483647),
        ("8463847412", -2147483648),  # 2147483648 wraps to Integer.MIN_VALUE
        ("9999999999", 1410065407),  # 9999999999 - 2 * 2^32
        ("0000000005", 705032704),  # 5000000000 - 2^32
        ("9463847412", -2147483647),  # 2147483649 wraps
        ("a", 49),  # no validation: 'a' - '0'
        ("/", -1),
        ("1a", 490 + 1),
        ("1898753251", 1523578981),  # the CRC entry of the first record in golden store-crc
    ],
)
def test_parse_crc32_digits_java_int_arithmetic(text, value):
    assert java_parse_digits(text) == value  # the hand values agree with the Java loop
    assert P.parse_crc32_digits(text) == value


@given(st.text(st.characters(min_codepoint=0, max_codepoint=0xFFFF, exclude_categories=("Cs",)), max_size=14))
def test_parse_crc32_digits_matches_java_loop(text):
    assert P.parse_crc32_digits(text) == java_parse_digits(text)


@given(st.text(st.sampled_from("0123456789"), min_size=10, max_size=10))
def test_parse_crc32_digits_ten_digits(text):
    n = int(text[::-1])
    want = n % 2**32
    assert P.parse_crc32_digits(text) == (want - 2**32 if want >= 2**31 else want)
