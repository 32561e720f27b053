#!/usr/bin/env python
"""Fuzz target for the native decoders (atheris / libFuzzer): random bytes, mutated from a corpus of valid
CommitLog records, IndexFile chains and message properties, go to the compiled decoders and to their pure
references; any difference in answer or error, and any crash, hang or over-allocation, fails.

    python tests/native/fuzz_decoders.py -max_total_time=60      (.ci/run)
    python tests/native/fuzz_decoders.py -atheris_runs=100000

libFuzzer's own flags pass through (-rss_limit_mb guards against over-allocation, -timeout against hangs).
"""

import os
import shutil
import struct
import sys
import tempfile

import atheris

with atheris.instrument_imports(include=["rocketstore"], enable_loader_override=False):
    from rocketstore import engine
    from rocketstore.errors import CorruptDataError
    from rocketstore.formats import cq as CQ
    from rocketstore.formats import index as I
    from rocketstore.formats import properties as P
    from rocketstore.formats.cq_ext import MAX_ADDR as CQ_EXT_MAX
    from rocketstore.formats import record as R
    from rocketstore.services import bulk_dispatch as B

# the differential tests' record helpers (this script runs from its folder: tests/native is on sys.path)
from _records import COLUMNS, plain_record

DELAY_LEVELS = (1000, 5000, 10000)


def _run(fn, buf, check_crc, dispatch_after):
    done, after, last, cols = fn(buf, 0, len(buf), check_crc, DELAY_LEVELS, dispatch_after)
    return done, after, last, None if cols is None else [getattr(cols, c) for c in COLUMNS]


def _message(fn, buf, pos):
    try:
        m = fn(buf, pos)
    except CorruptDataError as e:
        return ("error", e.reason, e.offset)
    return ("ok", m._f, m.properties_raw, m.body, m.topic, m.as_dict())


def _chain(fn, buf, args):
    out, seen = [], []

    def accept(phy):
        seen.append(phy)
        return phy & 1 == 0

    fn(buf, *args, out, accept)
    return out, seen


def test_one_input(data: bytes) -> None:
    if len(data) < 4:
        return
    what, knob = data[0] % 5, data[1]
    buf = data[4:]
    if what == 0:  # the bulk decoder
        check_crc, dispatch_after = bool(knob & 1), (-1, 0, 200, 1 << 40)[(knob >> 1) & 3]
        pure = _run(B.decode_run_py, buf, check_crc, dispatch_after)
        native = _run(B.decode_run_native, buf, check_crc, dispatch_after)
        assert pure == native, (pure, native)
    elif what == 1:  # one record into a StoredMessage
        pos = knob % 8
        pure, native = _message(R.decode_record_py, buf, pos), _message(R.decode_record, buf, pos)
        assert pure == native, (pure, native)
    elif what == 3:  # a get's plain units: the first 200 bytes are 10 units, the rest their segment
        units, seg = buf[:200], buf[200:]
        codes = None if knob & 1 else {int(x) for x in data[2:4]}
        args = (
            knob >> 4,
            codes,
            CQ_EXT_MAX,
            data[2] % 40 + 1,
            (500, 8, 300, 4),
            len(seg),
            data[3] * 10,
            0,
            len(seg) - (knob >> 1 & 7),
            seg,
            "TopicA",
            0,
        )
        out_py, out_c = [], []
        got_py, got_c = CQ.take_units_py(units, *args, out_py), CQ.take_units(units, *args, out_c)
        assert got_py == got_c and [m.as_dict() for m in out_py] == [m.as_dict() for m in out_c], (got_py, got_c)
    elif what == 4:  # a message's properties
        pure, native = P.parse_properties_py(buf), P.parse_properties(buf)
        assert pure == native and list(pure) == list(native), (pure, native)
    else:  # a query's chain walk over an index file of 4 slots and 8 entries
        slots, num = 4, 8
        size = I.file_size(slots, num)
        buf = buf[:size].ljust(size, b"\0")
        key_hash = knob & 3
        count, max_num = data[2] % 12 - 1, data[3] % 9 + 1
        args = (slots, 1000, count, num, key_hash, max_num, 1000, 1000 + (knob >> 2) * 1000)
        assert _chain(I.select_chain_py, buf, args) == _chain(I.select_chain, buf, args)


def _seeds() -> list[bytes]:
    """Valid inputs for the corpus: runs of records (V1 and V2, IPv4 and IPv6 hosts, tags, keys, a DELAY of
    the schedule topic, an appended CRC) and an index file with a chain."""
    out = []
    recs = b""
    for i, (topic, props, v2, host) in enumerate(
        [
            (b"TopicA", b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01u1\x02", False, "10.0.0.5:10911"),
            ("t\u00f6pic".encode(), "TAGS\x01\u00e9\x02".encode(), True, "[2001:db8::7]:40013"),
            (b"SCHEDULE_TOPIC_XXXX", b"DELAY\x012\x02TAGS\x01t\x02", True, "127.0.0.1:1"),
            (b"TopicC", R.encode_properties(b"a\x01b", True), False, "[fd00::5]:1"),
        ]
    ):
        recs += R.encode_record(
            topic=topic,
            body=bytes(range(i * 7)),
            props=props,
            queue_id=i,
            flag=0,
            sys_flag=0,
            born_timestamp=1,
            born_host=R.host_to_bytes(host),
            store_timestamp=1000,
            store_host=R.host_to_bytes("10.0.0.5:10911"),
            reconsume_times=0,
            prepared_transaction_offset=0,
            queue_offset=i,
            physical_offset=len(recs),
            v2=v2,
            append_crc=props.endswith(bytes(20)),
        )
    out.append(bytes([0, 0, 0, 0]) + recs + R.encode_blank(8))
    out.append(bytes([1, 0, 0, 0]) + recs)
    index = bytearray(I.file_size(4, 8))
    struct.pack_into(">i", index, I.HEADER_SIZE + 4, 3)
    base = I.HEADER_SIZE + 16
    for n, (phy, diff, prev) in {1: (100, 1, 0), 2: (202, 2, 1), 3: (300, 3, 2)}.items():
        struct.pack_into(">iqii", index, base + 20 * n, 1, phy, diff, prev)
    out.append(bytes([2, 0x0D, 5, 8]) + bytes(index))
    units = b"".join(struct.pack(">qiq", p, s, 0) for p, s in [(0, 0), (0, 0)])
    first = plain_record(topic=b"TopicA", props=b"TAGS\x01a", v2=True)
    units = struct.pack(">qiq", 0, len(first), 97) + units
    out.append(bytes([3, 0, 9, 9]) + units.ljust(200, b"\0") + first)
    out.append(bytes([4, 0, 0, 0]) + "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01\u00e9\x02".encode())
    return out


_seed_dir = []


def _fuzz_one(data: bytes) -> None:
    if _seed_dir:  # libFuzzer has read the seeds before the first input: nothing of ours stays behind
        shutil.rmtree(_seed_dir.pop(), ignore_errors=True)
    test_one_input(data)


def main() -> None:
    if engine.native is None:
        sys.exit(f"no native engine to fuzz: {engine.REASON}")
    seed_dir = tempfile.mkdtemp(prefix="rocketstore-fuzz-")
    paths = []
    for i, seed in enumerate(_seeds()):
        paths.append(os.path.join(seed_dir, f"seed{i}"))
        with open(paths[-1], "wb") as fh:
            fh.write(seed)
    _seed_dir.append(seed_dir)
    args = list(sys.argv) + [f"-seed_inputs={','.join(paths)}"]
    if not any(a.startswith("-rss_limit_mb") for a in args):
        args.append("-rss_limit_mb=1024")  # an over-allocation fails the run
    if not any(a.startswith("-timeout") for a in args):
        args.append("-timeout=10")  # so does a hang
    atheris.Setup(args, _fuzz_one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
