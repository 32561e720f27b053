"""The bulk dispatcher reads TAGS, KEYS and UNIQ_KEY from a properties string exactly as the full parser
(string2messageProperties) would, including repeated names, empty values and stray separators."""

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.formats.properties import parse_properties
from rocketstore.formats.record import tags_code
from rocketstore.services.bulk_dispatch import _props_cache, props_info_py

NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "XTAGS", "TAGSX", "", "a"])
VALUES = st.sampled_from(["", "t", "k1 k2", "é😀", "v\x01w", "TAGS"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(NAMES, st.sampled_from(["\x01", ""]), VALUES), max_size=6), st.booleans())
def test_props_info_agrees_with_the_full_parser(items, trailing):
    raw = "\x02".join(n + sep + v for n, sep, v in items) + ("\x02" if trailing else "")
    raw = raw.encode("utf-8")
    _props_cache.clear()
    props = parse_properties(raw)
    info = props_info_py(raw)
    assert info == (tags_code(props.get("TAGS")), props.get("KEYS") or "", props.get("UNIQ_KEY"), "DELAY" in props)


def test_inner_batch_properties_take_the_careful_path():
    assert props_info_py(b"INNER_NUM\x013\x02TAGS\x01a\x02") is None
    assert props_info_py(b"TAGS\x01a\x02INNER_BASE\x010\x02") is None
