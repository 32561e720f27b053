"""Java String.hashCode (tagsCode, index key hashes), checked against known Java values, a closed-form second
implementation and the golden stores."""

import os
import struct

import pytest
from hypothesis import given, strategies as st

from rocketstore.formats import javahash as J
from rocketstore.formats import record as R

from . import _golden as G
from . import _ref

MIN_INT = -(2**31)


def java_loop_hash(s: str) -> int:
    """h = 31*h + c over UTF-16 code units, with int overflow, written out by hand."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = _ref.java_int(31 * h + (data[i] << 8 | data[i + 1]))
    return h


@pytest.mark.parametrize(
    "s,h",
    [
        ("", 0),
        ("a", 97),
        ("Aa", 2112),
        ("BB", 2112),  # the classic collision
        ("TagA", 2598919),
        ("TagB", 2598920),
        ("hello", 99162322),
        ("polygenelubricants", MIN_INT),  # the well-known string hashing to Integer.MIN_VALUE
        ("😀", 0xD83D * 31 + 0xDE00),  # U+1F600 is the surrogate pair D83D DE00 in Java
        ("\U00010000", 0xD800 * 31 + 0xDC00),
        ("\uffff", 0xFFFF),
        ("标签-Unicode", -206781625),  # tagsCodeExpected of a golden message
    ],
)
def test_java_string_hash_known_values(s, h):
    assert java_loop_hash(s) == h
    assert _ref.java_hash(s) == h
    assert J.java_string_hash(s) == h


def test_java_string_hash_overflow():
    s = "z" * 50
    want = sum(ord("z") * 31 ** (49 - i) for i in range(50)) % 2**32
    want = want - 2**32 if want >= 2**31 else want
    assert J.java_string_hash(s) == want == java_loop_hash(s)


@given(st.text(max_size=60))
def test_java_string_hash_matches_closed_form(s):
    h = J.java_string_hash(s)
    assert h == _ref.java_hash(s) == java_loop_hash(s)
    assert MIN_INT <= h < 2**31


def test_polygenelubricants_by_hand():
    # recompute "polygenelubricants" step by step with explicit 32-bit wrap-around
    h = 0
    for c in "polygenelubricants":
        h = (h * 31 + ord(c)) % 2**32
    assert h == 0x80000000
    assert J.index_key_hash("polygenelubricants") == 0


@pytest.mark.parametrize("s", ["TagA", "", "polygenelubricants", "hello", "TopicA#key-243", "x" * 30, "😀键"])
def test_index_key_hash(s):
    h = _ref.java_hash(s)
    want = 0 if h == MIN_INT else abs(h)
    assert J.index_key_hash(s) == want


@given(st.text(max_size=40))
def test_index_key_hash_is_abs_with_min_value_zero(s):
    h = _ref.java_hash(s)
    got = J.index_key_hash(s)
    assert 0 <= got <= 2**31 - 1
    assert got == (0 if h == MIN_INT else abs(h))


def test_negative_hash_is_made_positive():
    s = next(w for w in ("z" * n for n in range(1, 40)) if _ref.java_hash(w) < 0)
    assert J.java_string_hash(s) < 0 and J.index_key_hash(s) == -_ref.java_hash(s)


def test_tags_code():
    assert R.tags_code(None) == 0
    assert R.tags_code("") == 0
    assert R.tags_code("TagA") == 2598919
    assert R.tags_code("TagB") == 2598920
    assert R.tags_code("polygenelubricants") == MIN_INT  # sign-extended, not abs
    assert R.tags_code("标签-Unicode") == -206781625


def test_tags_code_against_golden_manifest():
    n = 0
    for name in ("store-v1-basic", "store-v2-topics", "store-txn"):
        for e in G.manifest(name)["messages"]:
            subs = [e] if e["api"] == "putMessage" else e["messages"]
            for sub in subs:
                if "tagsCodeExpected" in sub and sub.get("tags") is not None:
                    assert R.tags_code(sub["tags"]) == sub["tagsCodeExpected"], sub["tags"]
                    assert _ref.java_hash(sub["tags"]) == sub["tagsCodeExpected"] or not sub["tags"]
                    n += 1
    assert n > 1000


def test_index_key_hash_against_golden_index_files():
    """Every entry of the real IndexFiles has keyHash = index_key_hash(topic + "#" + key) for a key of the
    message at its physical offset (UNIQ_KEY or a KEYS token)."""
    name = "store-v1-basic"
    by_phys = {}
    for _entry, sub, s, phys, _mid in G.stored_records(name):
        props = _ref.string2message_properties(G.b64(s["propertiesRaw_b64"]).decode("utf-8"))
        keys = [k for k in props.get("KEYS", "").split(" ") if k]
        if "UNIQ_KEY" in props:
            keys.append(props["UNIQ_KEY"])
        by_phys[phys] = {J.index_key_hash(s["topic"] + "#" + k) for k in keys}
        assert by_phys[phys] == {
            (0 if _ref.java_hash(s["topic"] + "#" + k) == MIN_INT else abs(_ref.java_hash(s["topic"] + "#" + k)))
            for k in keys
        }
    index_dir = G.path(name, "store", "index")
    slot_num = int(G.manifest(name)["config_all"]["maxHashSlotNum"])
    checked = 0
    for fn in sorted(os.listdir(index_dir)):
        with open(os.path.join(index_dir, fn), "rb") as fh:
            data = fh.read()
        _used_slots, count = struct.unpack_from(">ii", data, 32)  # header: ... hashSlotCount, indexCount
        base = 40 + slot_num * 4
        assert len(data) == base + int(G.manifest(name)["config_all"]["maxIndexNum"]) * 20
        for i in range(1, count):
            key_hash, phys = struct.unpack_from(">iq", data, base + i * 20)
            if phys in by_phys:
                assert key_hash in by_phys[phys]
                checked += 1
    assert checked > 1000
