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


NAMES = st.lists(
    st.one_of(st.sampled_from(["KEYS", "UNIQ_KEY", "TAGS", "a", "\ufffd", "\ufffda", "\u00e9", ""]), TEXTS),
    max_size=5,
)
RAWS = st.lists(
    st.one_of(
        st.none(),
        st.lists(PIECES, max_size=14).map(b"".join),
        st.lists(PIECES, max_size=14).map(lambda ps: bytearray(b"".join(ps))),
        st.lists(st.one_of(TEXTS, st.sampled_from(["\x01", "\x02", "a\x01", "\ud800"])), max_size=8).map("".join),
    ),
    max_size=8,
)


@settings(max_examples=600, deadline=None)
@given(RAWS, NAMES)
def test_property_values_same_as_reference(native, raws, names):
    want = P.property_values_py(raws, names)
    assert native.property_values(raws, names) == want
    assert native.property_values(tuple(raws), tuple(names)) == want
    # and what the reference says is parse_properties(raw).get(name), name by name
    assert want == [tuple((P.parse_properties_py(r) if r else {}).get(n) for n in names) for r in raws]


def test_property_values_by_hand(native):
    assert P.property_values is native.property_values
    raws = [b"a\x01x\x02b\x01y\x02a\x01\x02a\x01z", None, b"", b"\xff\x01q\x02\xc3\xa9\x01e", "a\x01\U0001f600"]
    # the last non-empty value of a name wins; a bad UTF-8 name byte reads as U+FFFD, so the name "\ufffd"
    # finds it while the ASCII names never do
    assert native.property_values(raws, ["a", "b", "\ufffd", "\u00e9", "c"]) == [
        ("z", "y", None, None, None),
        (None,) * 5,
        (None,) * 5,
        (None, None, "q", "e", None),
        ("\U0001f600", None, None, None, None),
    ]
    assert native.property_values([b"a\x01b"], []) == [()]
    for fn in (native.property_values, P.property_values_py):  # a raw that is no properties
        try:
            fn([1], ["a"])
        except TypeError:
            pass
        else:
            raise AssertionError(f"{fn} took an int")
    for fn in (native.property_values, P.property_values_py):
        try:
            fn([b""], ["n"] * 65)
        except ValueError:
            pass
        else:
            raise AssertionError(f"{fn} took 65 names")
