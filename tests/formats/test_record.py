"""CommitLog record layout (MessageExtEncoder / CommitLog / MessageDecoder), checked against hand-laid bytes,
literal hex and the golden stores written by the real RocketMQ store."""

import hashlib
import ipaddress
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from rocketstore.formats import properties as P
from rocketstore.formats import record as R

from . import _golden as G
from . import _ref

IP4_A = _ref.host("127.0.0.1", 80)  # 7F000001 00000050
IP4_STORE = _ref.host("10.0.0.5", 10911)  # 0A000005 00002A9F
IP6_A = _ref.host("2001:db8::7", 40013)  # 20010DB8 00000000 00000000 00000007 00009C4D
IP6_STORE = _ref.host("fd00::5", 10911)


def enc(**kw):
    """encode_record with neutral defaults for everything a test does not care about."""
    args = dict(
        topic=b"T",
        body=b"",
        props=b"",
        queue_id=0,
        flag=0,
        sys_flag=0,
        born_timestamp=0,
        born_host=IP4_A,
        store_timestamp=0,
        store_host=IP4_STORE,
        reconsume_times=0,
        prepared_transaction_offset=0,
        queue_offset=0,
        physical_offset=0,
        v2=False,
    )
    args.update(kw)
    return R.encode_record(**args)


def java_host_text(ip: str, port: int) -> str:
    """How Java prints an InetSocketAddress host: IPv6 with every group, no zero compression, no brackets."""
    a = ipaddress.ip_address(ip)
    if a.version == 4:
        return f"{a}:{port}"
    return ":".join(g.lstrip("0") or "0" for g in a.exploded.split(":")) + f":{port}"


# ---- constants ---------------------------------------------------------------------------------


def test_magic_codes_match_rocketmq():
    assert R.MAGIC_V1 == struct.unpack(">i", bytes.fromhex("DAA320A7"))[0] == -626843481
    assert R.MAGIC_V2 == struct.unpack(">i", bytes.fromhex("DAA320AB"))[0] == -626843477
    assert R.BLANK_MAGIC == struct.unpack(">i", bytes.fromhex("CBD43194"))[0] == -875286124


def test_sysflag_bits():
    assert (R.BORNHOST_V6_FLAG, R.STOREHOSTADDRESS_V6_FLAG) == (0x10, 0x20)
    assert (R.TRANSACTION_PREPARED_TYPE, R.TRANSACTION_COMMIT_TYPE, R.TRANSACTION_ROLLBACK_TYPE) == (0x4, 0x8, 0xC)
    assert R.INNER_BATCH_FLAG == 0x80 and R.MULTI_TAGS_FLAG == 0x2 and R.COMPRESSED_FLAG == 0x1
    for tran in (0x0, 0x4, 0x8, 0xC):
        assert R.transaction_type(tran | 0x1 | 0x2 | 0x10 | 0x20 | 0x80 | 0x700) == tran


def test_dispatch_rules_on_transaction_types():
    """MessageSysFlag: TRANSACTION_PREPARED_TYPE = 0x1 << 2, COMMIT = 0x2 << 2, ROLLBACK = 0x3 << 2;
    CommitLogDispatcherBuildConsumeQueue writes a unit for NOT and COMMIT only, IndexService.buildIndex
    returns early for ROLLBACK only. The other bits (compressed 0x1, multi tags 0x2, IPv6 hosts 0x10 and
    0x20, need-unwrap 0x40, inner batch 0x80, compression type 0x100..0x300) change nothing."""
    others = 0x1 | 0x2 | 0x10 | 0x20 | 0x40 | 0x80 | 0x300  # 0x3F3
    cases = [
        (0x0, True, True),
        (0x4, False, True),
        (0x8, True, True),
        (0xC, False, False),
        (0x3F3, True, True),
        (0x3F7, False, True),
        (0x3FB, True, True),
        (0x3FF, False, False),
        (0xBC, False, False),
        (0x84, False, True),
    ]  # rolled back / prepared with IPv6 hosts, inner batch
    for flag, unit, index in cases:
        assert bool(R.gets_queue_unit(flag)) is unit, hex(flag)
        assert bool(R.gets_index_entries(flag)) is index, hex(flag)
        assert flag & ~others & ~0xC == 0
    # numpy arrays of sysFlags (the bulk decoder's columns) answer row by row
    flags = np.array([c[0] for c in cases], dtype=np.int32)
    assert R.gets_queue_unit(flags).tolist() == [c[1] for c in cases]
    assert R.gets_index_entries(flags).tolist() == [c[2] for c in cases]
    # every combination of the eleven defined bits: only bits 2-3, read as Java's switch reads them, count
    for flag in range(0x800):
        tran = (flag >> 2) & 0x3  # 0 NOT, 1 PREPARED, 2 COMMIT, 3 ROLLBACK
        assert bool(R.gets_queue_unit(flag)) is (tran in (0, 2))
        assert bool(R.gets_index_entries(flag)) is (tran != 3)


# ---- exact bytes -------------------------------------------------------------------------------

MIN_RECORD_HEX = (
    "0000005B"  # TOTALSIZE 91
    "DAA320A7"  # MAGIC V1
    "00000000"  # BODYCRC of b"" is 0
    "00000001"  # QUEUEID 1
    "00000002"  # FLAG 2
    "0000000000000003"  # QUEUEOFFSET 3
    "0000000000000004"  # PHYSICALOFFSET 4
    "00000000"  # SYSFLAG
    "0000000000000005"  # BORNTIMESTAMP 5
    "7F00000100000050"  # BORNHOST 127.0.0.1:80
    "0000000000000006"  # STORETIMESTAMP 6
    "0A00000500002A9F"  # STOREHOST 10.0.0.5:10911
    "00000007"  # RECONSUMETIMES 7
    "0000000000000008"  # PREPARED_TX_OFFSET 8
    "00000000"  # BODYLEN 0
    "00"  # TOPICLEN 0 (V1: one byte)
    "0000"  # PROPLEN 0
)


def test_minimum_record_is_91_bytes_exactly():
    data = enc(
        topic=b"",
        queue_id=1,
        flag=2,
        queue_offset=3,
        physical_offset=4,
        born_timestamp=5,
        store_timestamp=6,
        reconsume_times=7,
        prepared_transaction_offset=8,
    )
    assert len(bytes.fromhex(MIN_RECORD_HEX)) == 91
    assert data == bytes.fromhex(MIN_RECORD_HEX)
    assert R.record_length(False, 0, 0, 0, 0) == 91
    m = R.decode_record(data)
    assert (m.size, m.queue_id, m.flag, m.queue_offset, m.physical_offset) == (91, 1, 2, 3, 4)
    assert (m.born_timestamp, m.store_timestamp, m.reconsume_times, m.prepared_transaction_offset) == (5, 6, 7, 8)
    assert m.topic == "" and m.body == b"" and m.properties == {} and m.body_crc == 0
    assert m.born_host == "127.0.0.1:80" and m.store_host == "10.0.0.5:10911"
    assert m.version == 1
    h = R.read_header(data)
    assert h.size == 91 and h.body_len == 0 and h.props_raw == b""


def test_small_v1_record_literal_hex():
    # body "123456789": the CRC-32 check value 0xCBF43926, masked to 31 bits -> 0x4BF43926
    data = enc(topic=b"T", body=b"123456789", props=b"a\x01b\x02")
    expected = bytes.fromhex(
        "00000069"
        "DAA320A7"
        "4BF43926"
        "00000000"
        "00000000"
        "0000000000000000"
        "0000000000000000"
        "00000000"
        "0000000000000000"
        "7F00000100000050"
        "0000000000000000"
        "0A00000500002A9F"
        "00000000"
        "0000000000000000"
        "00000009" + b"123456789".hex() + "01" + b"T".hex() + "0004" + b"a\x01b\x02".hex()
    )
    assert len(expected) == 0x69 == 105
    assert data == expected


def test_body_crc_is_crc32_masked_to_31_bits():
    assert R.body_crc(b"123456789") == 0x4BF43926
    assert R.body_crc(b"") == 0
    for body in (b"\x00", b"hello", bytes(range(256)) * 7):
        assert R.body_crc(body) == zlib.crc32(body) & 0x7FFFFFFF
    # a body whose full CRC has the top bit set really is masked
    body = b"123456789"
    assert zlib.crc32(body) & 0x80000000 and R.body_crc(body) == zlib.crc32(body) - 0x80000000
    data = enc(body=body)
    assert struct.unpack_from(">i", data, 8)[0] == 0x4BF43926


def test_explicit_body_crc_value_is_written_verbatim():
    data = enc(body=b"xyz", body_crc_value=12345)
    assert struct.unpack_from(">i", data, 8)[0] == 12345


def test_empty_body_and_empty_properties():
    data = enc(topic=b"TopicA", body=b"", props=b"")
    assert data == _ref.record(topic=b"TopicA", born_host=IP4_A, store_host=IP4_STORE)
    m = R.decode_record(data)
    assert m.body == b"" and m.properties == {} and m.tags is None and m.keys == [] and m.unique_key is None


def test_v2_record_for_long_topic():
    topic = b"t" * 128
    data = enc(topic=topic, body=b"b", props=b"TAGS\x01x\x02", v2=True)
    assert data[4:8] == bytes.fromhex("DAA320AB")
    # the TOPICLEN is two bytes after the body
    pos = 48 + 8 + 8 + 8 + 4 + 8 + 4 + 1
    assert data[pos : pos + 2] == bytes.fromhex("0080") and data[pos + 2 : pos + 2 + 128] == topic
    assert data == _ref.record(
        topic=topic, body=b"b", props=b"TAGS\x01x\x02", born_host=IP4_A, store_host=IP4_STORE, v2=True
    )
    assert len(data) == 91 + 1 + 1 + 128 + 7
    m = R.decode_record(data)
    assert m.topic == "t" * 128 and m.version == 2 and m.magic == R.MAGIC_V2 and m.properties == {"TAGS": "x"}


def test_v2_record_with_200_char_topic_and_v1_with_127():
    for n, v2 in ((127, False), (200, True)):
        topic = (b"LongTopic_" * 20)[:n]
        data = enc(topic=topic, v2=v2)
        assert data == _ref.record(topic=topic, born_host=IP4_A, store_host=IP4_STORE, v2=v2)
        assert R.decode_record(data).topic == topic.decode()
        assert R.record_length(v2, 0, 0, n, 0) == len(data)


def test_ipv6_born_host_sets_0x10_and_uses_20_bytes():
    data = enc(born_host=IP6_A, born_timestamp=11, store_timestamp=22)
    sysflag = struct.unpack_from(">i", data, 36)[0]
    assert sysflag == 0x10
    assert data[48 : 48 + 20] == bytes.fromhex("20010DB800000000000000000000000700009C4D")
    assert data == _ref.record(
        topic=b"T", sys_flag=0x10, born_ts=11, born_host=IP6_A, store_ts=22, store_host=IP4_STORE
    )
    assert len(data) == 91 + 12 + 1
    m = R.decode_record(data)
    assert m.born_host == "2001:db8:0:0:0:0:0:7:40013" and m.store_host == "10.0.0.5:10911"
    assert m.sys_flag == 0x10 and len(m.msg_id) == 32


def test_ipv6_store_host_sets_0x20_and_gives_56_char_msgid():
    data = enc(store_host=IP6_STORE, physical_offset=0x1F875, sys_flag=R.TRANSACTION_COMMIT_TYPE)
    assert struct.unpack_from(">i", data, 36)[0] == 0x28
    assert data == _ref.record(
        topic=b"T", sys_flag=0x28, born_host=IP4_A, store_host=IP6_STORE, physical_offset=0x1F875
    )
    m = R.decode_record(data)
    assert m.store_host == "fd00:0:0:0:0:0:0:5:10911"
    assert m.msg_id == "FD00000000000000000000000000000500002A9F000000000001F875"


def test_both_hosts_ipv6():
    data = enc(born_host=IP6_A, store_host=IP6_STORE, store_timestamp=1700000000123)
    assert struct.unpack_from(">i", data, 36)[0] == 0x30
    assert len(data) == 91 + 24 + 1 == R.record_length(False, 0x30, 0, 1, 0)
    assert data == _ref.record(topic=b"T", sys_flag=0x30, born_host=IP6_A, store_host=IP6_STORE, store_ts=1700000000123)
    assert R.store_timestamp_at(data, 0) == 1700000000123


@pytest.mark.parametrize("tran", [0x0, 0x4, 0x8, 0xC])
def test_transaction_sysflags_round_trip(tran):
    data = enc(sys_flag=tran | R.MULTI_TAGS_FLAG, prepared_transaction_offset=353 if tran == 0x8 else 0)
    assert struct.unpack_from(">i", data, 36)[0] == tran | 0x2
    m = R.decode_record(data)
    assert m.sys_flag == tran | 0x2 and R.transaction_type(m.sys_flag) == tran
    assert m.prepared_transaction_offset == (353 if tran == 0x8 else 0)


def test_record_length_formula():
    # calMsgLength: 4+4+4+4+4+8+8+4+8+born+8+store+4+8+4+body+topicLenSize+topic+2+props
    for v2 in (False, True):
        for sysflag in (0, 0x10, 0x20, 0x30, 0x10 | 0xC | 0x80):
            for body, topic, props in ((0, 0, 0), (1, 2, 3), (4096, 127, 32767)):
                born = 20 if sysflag & 0x10 else 8
                store = 20 if sysflag & 0x20 else 8
                want = 72 + born + store + body + (2 if v2 else 1) + topic + 2 + props
                assert R.record_length(v2, sysflag, body, topic, props) == want
    assert R.record_length(True, 0x30, 0, 0, 0) == 116


# ---- appended CRC property -----------------------------------------------------------------


def test_encode_properties_reserves_20_bytes_and_inserts_missing_separator_on_single_path():
    assert P.CRC32_RESERVED_LEN == 20
    zeros = b"\x00" * 20
    assert R.encode_properties(b"a\x01b\x02", True) == b"a\x01b\x02" + zeros
    assert R.encode_properties(b"a\x01b", True, single=True) == b"a\x01b\x02" + zeros
    assert R.encode_properties(b"a\x01b", True, single=False) == b"a\x01b" + zeros
    assert R.encode_properties(b"", True, single=True) == zeros
    assert R.encode_properties(b"", True, single=False) == zeros
    # without the CRC nothing is changed, not even a missing separator
    assert R.encode_properties(b"a\x01b", False) == b"a\x01b"
    assert R.encode_properties(b"", False) == b""


def test_appended_crc_entry_literal():
    # crc 123 -> digits "3210000000" (least significant first, zero padded at the end)
    assert P.crc32_property(123) == b"__CRC32#\x013210000000\x02"
    assert P.crc32_property(0) == b"__CRC32#\x010000000000\x02"
    assert P.crc32_property(0x7FFFFFFF) == b"__CRC32#\x017463847412\x02"
    assert len(P.crc32_property(5)) == 20


def test_record_with_appended_crc():
    props = R.encode_properties(b"TAGS\x01TagA", True)
    data = enc(
        topic=b"TopicA",
        body=b"hello",
        props=props,
        append_crc=True,
        physical_offset=12345,
        store_timestamp=1700000000001,
    )
    head = data[:-20]
    crc = zlib.crc32(head) & 0x7FFFFFFF
    assert data[-20:] == b"__CRC32#\x01" + str(crc)[::-1].ljust(10, "0").encode() + b"\x02"
    assert data == _ref.record(
        topic=b"TopicA",
        body=b"hello",
        props=b"TAGS\x01TagA\x02" + bytes(20),
        born_host=IP4_A,
        store_host=IP4_STORE,
        physical_offset=12345,
        store_ts=1700000000001,
        crc_reserved=True,
    )
    m = R.decode_record(data)
    assert m.properties == {"TAGS": "TagA", "__CRC32#": str(crc)[::-1].ljust(10, "0")}
    # the CRC covers the offsets too: another physical offset gives another CRC entry
    other = enc(
        topic=b"TopicA",
        body=b"hello",
        props=props,
        append_crc=True,
        physical_offset=12346,
        store_timestamp=1700000000001,
    )
    assert other[-20:] == _ref.crc_entry(zlib.crc32(other[:-20]) & 0x7FFFFFFF) != data[-20:]


def test_appended_crc_with_empty_properties():
    data = enc(props=R.encode_properties(b"", True), append_crc=True)
    assert struct.unpack_from(">H", data, len(data) - 22)[0] == 20
    crc = zlib.crc32(data[:-20]) & 0x7FFFFFFF
    assert data[-20:] == _ref.crc_entry(crc)
    assert len(data) == 91 + 1 + 20


def test_fill_crc_property_overwrites_last_20_bytes():
    raw = b"x" * 50 + bytes(20)
    out = R.fill_crc_property(bytearray(raw))
    assert isinstance(out, bytes) and out[:50] == b"x" * 50
    assert out[50:] == _ref.crc_entry(zlib.crc32(b"x" * 50) & 0x7FFFFFFF)


# ---- blank filler ------------------------------------------------------------------------------


def test_encode_blank():
    assert R.encode_blank(8) == bytes.fromhex("00000008CBD43194")
    assert R.encode_blank(20469) == bytes.fromhex("00004FF5CBD43194")
    assert R.END_FILE_MIN_BLANK_LENGTH == 8
    buf = b"\x00" * 16 + R.encode_blank(40) + b"\x00" * 32
    assert R.is_blank(buf, 16) and not R.is_blank(buf, 0) and not R.is_blank(buf[:20], 16)


# ---- hosts and msgId ---------------------------------------------------------------------------


def test_host_from_bytes_java_style():
    assert R.host_from_bytes(bytes.fromhex("C0A8010100 00C350".replace(" ", ""))) == "192.168.1.1:50000"
    assert (
        R.host_from_bytes(bytes.fromhex("20010db8000000000000000000000007") + (40013).to_bytes(4, "big"))
        == "2001:db8:0:0:0:0:0:7:40013"
    )
    assert R.host_from_bytes(bytes(15) + b"\x01" + (1).to_bytes(4, "big")) == "0:0:0:0:0:0:0:1:1"
    assert (
        R.host_from_bytes(bytes.fromhex("fe80000000000000abcd00000000ffff") + (0).to_bytes(4, "big"))
        == "fe80:0:0:0:abcd:0:0:ffff:0"
    )


def test_host_to_bytes():
    assert R.host_to_bytes("10.0.0.5:10911") == bytes.fromhex("0A00000500002A9F")
    assert R.host_to_bytes("[2001:db8::7]:40013") == IP6_A
    assert R.host_to_bytes("2001:db8:0:0:0:0:0:7:40013") == IP6_A
    for bad in ("10.0.0.5", "nohost:1", "10.0.0.5:x", "10.0.0.5:-1", "1.2.3.4:4294967296"):
        with pytest.raises(ValueError):
            R.host_to_bytes(bad)


def test_make_and_parse_msg_id():
    assert R.make_msg_id(IP4_STORE, 0) == "0A00000500002A9F0000000000000000"
    assert R.make_msg_id(IP4_STORE, 12819) == "0A00000500002A9F0000000000003213"
    v6 = R.make_msg_id(IP6_STORE, 129141)
    assert v6 == "FD00000000000000000000000000000500002A9F000000000001F875" and len(v6) == 56
    assert R.parse_msg_id("0A00000500002A9F0000000000003213") == ("10.0.0.5:10911", 12819)
    assert R.parse_msg_id(v6) == ("fd00:0:0:0:0:0:0:5:10911", 129141)
    for bad in ("", "0A00", "0A00000500002A9F000000000000321", "ZZ00000500002A9F0000000000003213"):
        with pytest.raises(ValueError):
            R.parse_msg_id(bad)


@given(
    st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6).filter(lambda a: a.ipv4_mapped is None)),
    st.integers(0, 65535),
    st.integers(0, 2**63 - 1),
)
def test_msg_id_round_trip(ip, port, offset):
    hb = ip.packed + struct.pack(">i", port)
    mid = R.make_msg_id(hb, offset)
    assert mid == (hb + struct.pack(">q", offset)).hex().upper()
    assert len(mid) == (32 if ip.version == 4 else 56)
    assert R.parse_msg_id(mid) == (java_host_text(str(ip), port), offset)
    assert R.parse_msg_id(mid.lower()) == (java_host_text(str(ip), port), offset)


# ---- decode ------------------------------------------------------------------------------------

TOPIC_CHARS = "%|-_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
PROP_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x01\x02"), min_size=1, max_size=12)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
# Java turns IPv4-mapped IPv6 addresses into Inet4Address (4 bytes), so they are left out here.
V6 = st.ip_addresses(v=6).filter(lambda a: a.ipv4_mapped is None)
HOSTS = st.tuples(st.one_of(st.ip_addresses(v=4), V6), st.integers(0, 65535))


@st.composite
def messages(draw):
    topic = draw(st.text(st.sampled_from(TOPIC_CHARS), min_size=1, max_size=200))
    props = draw(st.dictionaries(PROP_TEXT, PROP_TEXT, max_size=6))
    raw = "".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode()
    if raw and draw(st.booleans()):
        raw = raw[:-1]  # a custom properties string without the final \x02 is fine
    (bip, bport), (sip, sport) = draw(HOSTS), draw(HOSTS)
    sysflag = draw(st.integers(0, 2**31 - 1)) & ~0x30
    return dict(
        topic=topic,
        props=props,
        raw=raw,
        body=draw(st.binary(max_size=300)),
        queue_id=draw(INT32),
        flag=draw(INT32),
        sys_flag=sysflag,
        born_ts=draw(INT64),
        born=(str(bip), bport),
        store_ts=draw(INT64),
        store=(str(sip), sport),
        reconsume=draw(INT32),
        prepared=draw(INT64),
        queue_offset=draw(INT64),
        phys=draw(INT64),
        v2=len(topic) > 127 or draw(st.booleans()),
    )


def _encode_both(m, append_crc=False):
    born, store = _ref.host(*m["born"]), _ref.host(*m["store"])
    v6 = (0x10 if len(born) == 20 else 0) | (0x20 if len(store) == 20 else 0)
    topic = m["topic"].encode()
    props = R.encode_properties(m["raw"], append_crc) if append_crc else m["raw"]
    got = R.encode_record(
        topic=topic,
        body=m["body"],
        props=props,
        queue_id=m["queue_id"],
        flag=m["flag"],
        sys_flag=m["sys_flag"],
        born_timestamp=m["born_ts"],
        born_host=born,
        store_timestamp=m["store_ts"],
        store_host=store,
        reconsume_times=m["reconsume"],
        prepared_transaction_offset=m["prepared"],
        queue_offset=m["queue_offset"],
        physical_offset=m["phys"],
        v2=m["v2"],
        append_crc=append_crc,
    )
    ref_props = m["raw"]
    if append_crc:
        ref_props = (ref_props + b"\x02" if ref_props and not ref_props.endswith(b"\x02") else ref_props) + bytes(20)
    want = _ref.record(
        topic=topic,
        body=m["body"],
        props=ref_props,
        queue_id=m["queue_id"],
        flag=m["flag"],
        sys_flag=m["sys_flag"] | v6,
        born_ts=m["born_ts"],
        born_host=born,
        store_ts=m["store_ts"],
        store_host=store,
        reconsume=m["reconsume"],
        prepared=m["prepared"],
        queue_offset=m["queue_offset"],
        physical_offset=m["phys"],
        v2=m["v2"],
        crc_reserved=append_crc,
    )
    return got, want, v6, store


def _check_decoded(d, m, data, v6, store, pos=0, size=None):
    assert d.topic == m["topic"]
    assert d.body == m["body"] and d.body_crc == zlib.crc32(m["body"]) & 0x7FFFFFFF
    assert (d.queue_id, d.flag, d.sys_flag) == (m["queue_id"], m["flag"], m["sys_flag"] | v6)
    assert (d.born_timestamp, d.store_timestamp) == (m["born_ts"], m["store_ts"])
    assert (d.reconsume_times, d.prepared_transaction_offset) == (m["reconsume"], m["prepared"])
    assert (d.queue_offset, d.physical_offset) == (m["queue_offset"], m["phys"])
    assert d.born_host == java_host_text(*m["born"]) and d.store_host == java_host_text(*m["store"])
    assert d.size == (len(data) if size is None else size) and d.magic == (R.MAGIC_V2 if m["v2"] else R.MAGIC_V1)
    assert d.version == (2 if m["v2"] else 1)
    assert d.msg_id == (store + struct.pack(">q", m["phys"])).hex().upper()
    assert R.store_timestamp_at(data, pos) == m["store_ts"]


@given(messages())
def test_encode_matches_reference_and_decode_round_trips(m):
    got, want, v6, store = _encode_both(m)
    assert got == want
    assert R.record_length(m["v2"], m["sys_flag"] | v6, len(m["body"]), len(m["topic"].encode()), len(m["raw"])) == len(
        got
    )
    d = R.decode_record(got)
    _check_decoded(d, m, got, v6, store)
    assert d.properties == m["props"]
    h = R.read_header(got)
    assert h.props_raw == m["raw"] and got[h.body_pos : h.body_pos + h.body_len] == m["body"]
    assert R.decode_record(got, with_body=False).body is None


@settings(max_examples=80)
@given(messages())
def test_appended_crc_round_trip(m):
    got, want, v6, store = _encode_both(m, append_crc=True)
    assert got == want
    d = R.decode_record(got)
    _check_decoded(d, m, got, v6, store)
    crc = zlib.crc32(got[:-20]) & 0x7FFFFFFF
    assert d.properties == {**m["props"], "__CRC32#": str(crc)[::-1].ljust(10, "0")}


@settings(max_examples=40)
@given(messages(), messages(), st.binary(max_size=40))
def test_decode_at_position_inside_a_larger_buffer(m1, m2, junk):
    r1, _, _, _ = _encode_both(m1)
    r2, _, v6, store = _encode_both(m2)
    buf = junk + r1 + r2 + b"\x00" * 7
    d1 = R.decode_record(buf, len(junk))
    assert d1.size == len(r1) and d1.body == m1["body"]
    d2 = R.decode_record(memoryview(buf), len(junk) + len(r1), len(junk) + len(r1) + len(r2))
    _check_decoded(d2, m2, buf, v6, store, pos=len(junk) + len(r1), size=len(r2))
    assert d2.properties == m2["props"]


def test_stored_message_tags_keys_and_unique_key():
    data = enc(props=b"TAGS\x01TagA\x02KEYS\x01a b  c\x02UNIQ_KEY\x01U1\x02")
    m = R.decode_record(data)
    assert m.tags == "TagA" and m.keys == ["a", "b", "c"] and m.unique_key == "U1"
    d = m.as_dict()
    assert d["tags"] == "TagA" and d["keys"] == ["a", "b", "c"] and d["topic"] == "T" and "magic" not in d


def test_store_timestamp_at_follows_sysflag():
    for born in (IP4_A, IP6_A):
        buf = b"\xff" * 13 + enc(born_host=born, store_timestamp=-2) + b"\xff" * 5
        assert R.store_timestamp_at(buf, 13) == -2


def test_parse_delay_levels_default():
    levels = R.parse_delay_levels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
    assert len(levels) == 18 and levels[0] == 1000 and levels[6] == 180_000 and levels[-1] == 7_200_000
    assert R.parse_delay_levels("1d") == (86_400_000,)
    for bad in ("", "1s  5s", "5x", "1s 5"):
        with pytest.raises(ValueError):
            R.parse_delay_levels(bad)


# ---- golden stores -------------------------------------------------------------------------


def _check_against_manifest(name):
    count = 0
    for entry, sub, s, phys, msg_id in G.stored_records(name):
        seg, pos = G.locate(name, phys)
        m = R.decode_record(seg, pos)
        assert m.size == s["totalSize"]
        assert m.magic == s["magicCodeInt"] and f"0x{m.magic & 0xFFFFFFFF:08X}" == s["magicCode"]
        assert m.body_crc == s["bodyCRC"]
        assert (m.queue_id, m.flag, m.sys_flag) == (s["queueId"], s["flag"], s["sysFlag"])
        assert (m.queue_offset, m.physical_offset) == (s["queueOffsetField"], s["physicalOffsetField"])
        assert m.physical_offset == phys
        assert (m.born_timestamp, m.store_timestamp) == (s["bornTimestamp"], s["storeTimestamp"])
        assert m.reconsume_times == s["reconsumeTimes"]
        assert m.prepared_transaction_offset == s["preparedTransactionOffset"]
        assert m.topic == s["topic"] and len(m.topic.encode()) == s["topicLength"]
        assert len(m.body) == s["bodyLength"]
        if "body_b64" in sub:
            assert m.body == G.b64(sub["body_b64"])
        if "body_sha256" in sub:
            assert hashlib.sha256(m.body).hexdigest() == sub["body_sha256"]
        assert m.body_crc == zlib.crc32(m.body) & 0x7FFFFFFF
        raw = G.b64(s["propertiesRaw_b64"])
        assert len(raw) == s["propertiesLength"]
        assert R.read_header(seg, pos).props_raw == raw
        assert m.properties == _ref.string2message_properties(raw.decode("utf-8"))
        assert m.msg_id == msg_id
        assert m.born_host == entry["bornHost"] and m.store_host == entry["storeHost"]
        assert R.store_timestamp_at(seg, pos) == s["storeTimestamp"]
        count += 1
    return count


def test_golden_v1_basic_every_record_decodes_to_the_manifest():
    n = _check_against_manifest("store-v1-basic")
    assert n >= 2000


@pytest.mark.parametrize("name", ["store-v2-topics", "store-txn", "store-crc"])
def test_golden_other_stores_decode_to_the_manifest(name):
    assert _check_against_manifest(name) > 0


def test_golden_v1_basic_first_records_spot_check():
    m = G.manifest("store-v1-basic")["messages"]
    rec0 = R.decode_record(*G.locate("store-v1-basic", 0))
    assert (rec0.topic, rec0.queue_id, rec0.size, rec0.tags) == ("TopicA", 2, 445, "TagB")
    assert rec0.keys == ["key-243", "key-72", "order-29"]
    assert rec0.msg_id == "0A00000500002A9F0000000000000000" == m[0]["msgId"]
    # an IPv6 store host record (sysFlag 0x20): 56-char msgId
    e = next(x for x in m if x["api"] == "putMessage" and x["stored"]["sysFlag"] & 0x20)
    d = R.decode_record(*G.locate("store-v1-basic", e["wroteOffset"]))
    assert d.sys_flag & 0x20 and len(d.msg_id) == 56 and d.store_host == e["storeHost"] == "fd00:0:0:0:0:0:0:5:10911"
    # an IPv6 born host record (sysFlag 0x10)
    e = next(x for x in m if x["api"] == "putMessage" and x["stored"]["sysFlag"] & 0x10)
    d = R.decode_record(*G.locate("store-v1-basic", e["wroteOffset"]))
    assert d.born_host == e["bornHost"] and d.born_host.startswith("2001:db8:0:0:0:0:0:")


def _golden_body(name, e):
    if "body_b64" in e:
        return G.b64(e["body_b64"])
    seg, pos = G.locate(name, e["wroteOffset"])
    sysflag = struct.unpack_from(">i", seg, pos + 36)[0]
    p = pos + 48 + (20 if sysflag & 0x10 else 8) + 8 + (20 if sysflag & 0x20 else 8) + 12
    blen = struct.unpack_from(">i", seg, p)[0]
    return seg[p + 4 : p + 4 + blen]


@pytest.mark.parametrize(
    "name,append_crc",
    [("store-v1-basic", False), ("store-v2-topics", False), ("store-txn", False), ("store-crc", True)],
)
def test_golden_single_puts_re_encode_byte_for_byte(name, append_crc):
    """encode_record from the manifest's inputs gives exactly the bytes the real store wrote."""
    n = 0
    for e in G.manifest(name)["messages"]:
        if e["api"] != "putMessage":
            continue
        s = e["stored"]
        props = e["inputPropertiesString"].encode("utf-8")
        if append_crc:
            props = R.encode_properties(props, True, single=True)
        data = R.encode_record(
            topic=e["topic"].encode(),
            body=_golden_body(name, e),
            props=props,
            queue_id=e["queueId"],
            flag=e["flag"],
            sys_flag=e["inputSysFlag"],
            born_timestamp=e["bornTimestamp"],
            born_host=R.host_to_bytes(e["bornHost"]),
            store_timestamp=e["storeTimestamp"],
            store_host=R.host_to_bytes(e["storeHost"]),
            reconsume_times=e["reconsumeTimes"],
            prepared_transaction_offset=e["preparedTransactionOffset"],
            queue_offset=s["queueOffsetField"],
            physical_offset=e["wroteOffset"],
            v2=len(e["topic"]) > 127,
            append_crc=append_crc,
        )
        assert data == G.record_bytes(name, e["wroteOffset"], e["wroteBytes"]), e["seq"]
        n += 1
    assert n > 0


def test_golden_v1_basic_blank_fillers():
    """Every commitlog file but the last ends with an 8-byte BLANK (remaining size, magic), then zeros."""
    name = "store-v1-basic"
    fs = G.file_size(name)
    ends = {}
    for e in G.manifest(name)["messages"]:
        start = e["wroteOffset"] - e["wroteOffset"] % fs
        ends[start] = max(ends.get(start, 0), e["wroteOffset"] % fs + e["wroteBytes"])
    starts = sorted(ends)
    assert len(starts) > 10
    for start in starts[:-1]:
        seg, end = G.segment(name, start), ends[start]
        remaining = fs - end
        assert remaining >= 8
        assert seg[end : end + 8] == struct.pack(">i", remaining) + bytes.fromhex("CBD43194")
        assert R.encode_blank(remaining) == seg[end : end + 8]
        assert R.is_blank(seg, end)
        assert seg[end + 8 :] == bytes(remaining - 8)
