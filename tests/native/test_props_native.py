"""The compiled parse_properties against the pure reference (formats.properties.parse_properties_py): the same
dict, order included, for random bytes and texts; and a few answers worked out by hand."""

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.formats import properties as P

PIECES = st.one_of(
    st.sampled_from(
        [
            b"\x01",
            b"\x02",
            b"KEYS",
            b"UNIQ_KEY",
            b"TAGS",
            b"a",
            b" ",
            b"\xff",
            b"\xe4\xb8",
            b"\xed\xa0\x80",
            b"\xf0\x9f\x98\x80",
            b"\x00",
        ]
    ),
    st.binary(max_size=5),
)
TEXTS = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=12)


@settings(max_examples=800, deadline=None)
@given(st.lists(PIECES, max_size=14).map(b"".join))
def test_parse_properties_same_as_reference(native, raw):
    want = P.parse_properties_py(raw)
    for arg in (raw, bytearray(raw), memoryview(raw)):
        got = native.parse_properties(arg)
        assert got == want and list(got) == list(want)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(TEXTS, st.sampled_from(["\x01", "\x02", "KEYS\x01", "\ud800"])), max_size=8).map("".join))
def test_parse_properties_of_a_text_same_as_reference(native, text):
    want = P.parse_properties_py(text)
    got = native.parse_properties(text)
    assert got == want and list(got) == list(want)


def test_parse_properties_by_hand(native):
    assert P.parse_properties is native.parse_properties
    raw = b"KEYS\x01a b\x02\x02\x01x\x02E\x01\x02UNIQ_KEY\x01U\x02KEYS\x01c\x02T\x01\xff\x01z"
    got = native.parse_properties(raw)
    # an empty part, an empty name and an empty value are dropped; the second KEYS replaces the first in its
    # place; the value is everything after the first \x01, a bad UTF-8 byte is U+FFFD; no final \x02 needed
    assert list(got.items()) == [("KEYS", "c"), ("UNIQ_KEY", "U"), ("T", "\ufffd\x01z")]
    assert native.parse_properties(b"") == {} and native.parse_properties("a\x01\U0001f600") == {"a": "\U0001f600"}
