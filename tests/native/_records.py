"""Random CommitLog records and corruptions of them, for the differential tests of the native decoders.

Records are encoded with formats.record.encode_record (the put path's encoder); the decoders under test
only read them. Properties mix the names the decoders look for (TAGS, KEYS, UNIQ_KEY, DELAY, INNER_NUM,
INNER_BASE, the appended CRC) with others, empty values, repeated names, non-ASCII text and raw bytes."""

import inspect
import struct

from hypothesis import strategies as st

from rocketstore.formats import properties as P
from rocketstore.formats import record as R
from rocketstore.services.pipeline import DispatchColumns

DELAY_LEVELS = (1000, 5000, 10000, 30000)
# the columns decode_run fills for a run of records, as DispatchColumns takes them
COLUMNS = tuple(inspect.signature(DispatchColumns).parameters)
SCHEDULE = "SCHEDULE_TOPIC_XXXX"

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"), max_size=10)
NAMES = st.sampled_from(
    ["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "INNER_NUM", "INNER_BASE", "__CRC32#", "a", "TAGSX", "", "KEY", "WAIT"]
)
VALUES = TEXT | st.sampled_from(["", "1", "2", "4", "99", "x", "-1", " 3", "k1 k2  k3", "\u00e9t\u00e9"])


@st.composite
def properties(draw) -> bytes:
    if draw(st.integers(0, 9)) == 0:  # anything at all, separators included
        return draw(st.binary(max_size=60))
    items = draw(st.lists(st.tuples(NAMES, VALUES), max_size=6))
    parts = [(f"{k}\x01{v}" if draw(st.integers(0, 15)) else k).encode("utf-8") for k, v in items]
    raw = b"\x02".join(parts)
    if parts and draw(st.booleans()):
        raw += b"\x02"
    return raw


HOSTS = st.sampled_from(
    [
        R.host_to_bytes("10.0.0.5:10911"),
        R.host_to_bytes("127.0.0.1:1"),
        R.host_to_bytes("[2001:db8::7]:40013"),
        R.host_to_bytes("[fd00::5]:10911"),
    ]
)
SYS_FLAGS = st.sampled_from([0, 0, 0, 0x1, 0x2, 0x4, 0x8, 0xC, 0x80, 0x40, 0x700])
TOPICS = st.sampled_from(["TopicA", "TopicB", SCHEDULE, "t\u00f6pic", "\u4e3b\u9898", "T" * 120]) | TEXT


# every field of encode_record zero or empty (IPv4 hosts 0.0.0.0:0, a version 1 record): the tests name only what
# matters to them
PLAIN = dict(
    topic=b"T",
    body=b"x",
    props=b"",
    queue_id=0,
    flag=0,
    sys_flag=0,
    born_timestamp=0,
    born_host=bytes(8),
    store_timestamp=0,
    store_host=bytes(8),
    reconsume_times=0,
    prepared_transaction_offset=0,
    queue_offset=0,
    physical_offset=0,
    v2=False,
)


def plain_record(**fields) -> bytes:
    """One record as the put path encodes it: PLAIN but for `fields`."""
    return R.encode_record(**{**PLAIN, **fields})


@st.composite
def record_params(draw) -> dict:
    append_crc = draw(st.integers(0, 5)) == 0
    props = draw(properties())
    if append_crc:
        props = R.encode_properties(props, True)
    return dict(
        topic=draw(TOPICS).encode("utf-8"),
        body=draw(st.binary(max_size=40)),
        props=props,
        queue_id=draw(st.integers(0, 3)),
        flag=draw(st.integers(-2, 2)),
        sys_flag=draw(SYS_FLAGS),
        born_timestamp=draw(st.integers(0, 2**41)),
        born_host=draw(HOSTS),
        store_timestamp=draw(st.integers(0, 2**41)),
        store_host=draw(HOSTS),
        reconsume_times=draw(st.integers(0, 3)),
        prepared_transaction_offset=draw(st.integers(0, 5)),
        queue_offset=draw(st.integers(0, 10**6)),
        v2=draw(st.booleans()),
        body_crc_value=None if draw(st.integers(0, 7)) else draw(st.integers(-5, 2**31 - 1)),
        append_crc=append_crc,
    )


@st.composite
def segment(draw, max_records: int = 8) -> bytes:
    """Records one after another, each PHYSICALOFFSET (mostly) where it sits, then a tail: nothing, zeros,
    a BLANK filler or random bytes."""
    out = bytearray()
    for params in draw(st.lists(record_params(), min_size=0, max_size=max_records)):
        phys = len(out) if draw(st.integers(0, 9)) else draw(st.integers(-3, 10**6))
        out += R.encode_record(physical_offset=phys, **params)
    tail = draw(st.sampled_from(["none", "zeros", "blank", "random"]))
    if tail == "zeros":
        out += bytes(draw(st.integers(1, 100)))
    elif tail == "blank":
        out += R.encode_blank(100) + bytes(92)
    elif tail == "random":
        out += draw(st.binary(max_size=120))
    return bytes(out)


ABSURD = st.sampled_from([0, 1, -1, 90, 91, 92, 0x7FFFFFFF, -0x80000000, 0x8000, 0xFFFF, 200, 10**6])


@st.composite
def corrupted(draw, buf: bytes) -> bytes:
    """buf with a few bytes flipped, an int32 overwritten with an absurd value, or cut short."""
    b = bytearray(buf)
    for _ in range(draw(st.integers(1, 3))):
        if not b:
            break
        op = draw(st.sampled_from(["flip", "int", "short", "trunc"]))
        at = draw(st.integers(0, len(b) - 1))
        if op == "flip":
            b[at] ^= draw(st.integers(1, 255))
        elif op == "int" and at + 4 <= len(b):
            struct.pack_into(">i", b, at, draw(ABSURD))
        elif op == "short" and at + 2 <= len(b):
            struct.pack_into(">H", b, at, draw(st.sampled_from([0, 1, 0x7FFF, 0x8000, 0xFFFF, 300])))
        elif op == "trunc":
            del b[at:]
    return bytes(b)


def crc_property_ok(raw: bytes) -> bool:
    return P.CRC32.encode() in raw
