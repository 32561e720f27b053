"""The compiled scan path against the pure reference: the bulk decoder (decode_run) and verify's walk give the
same answers on random records and on corrupted ones, and never more than the bytes allow."""

import os
import struct
import tempfile

import numpy as np

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import engine
from rocketstore.config.store_config import StoreConfig
from rocketstore.formats import record as R
from rocketstore.services import bulk_dispatch as B
from rocketstore.maintenance.verify import Verifier
from rocketstore.maintenance.verify import _Record as Record

from ._records import COLUMNS, DELAY_LEVELS, SCHEDULE, corrupted, plain_record, segment

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def as_plain(result):
    done, after, last, cols = result
    if cols is None:
        return done, after, last, None
    return done, after, last, {name: getattr(cols, name) for name in COLUMNS}


def both(buf, pos=0, limit=None, check_crc=True, dispatch_after=-1):
    limit = len(buf) if limit is None else limit
    pure = as_plain(B.decode_run_py(buf, pos, limit, check_crc, DELAY_LEVELS, dispatch_after))
    native = as_plain(B.decode_run_native(buf, pos, limit, check_crc, DELAY_LEVELS, dispatch_after))
    return pure, native


def test_decode_run_is_native_when_built(native):
    assert B.decode_run is B.decode_run_native


@SETTINGS
@given(segment(), st.booleans(), st.sampled_from([-1, 0, 200, 500, 10**7]))
def test_decode_run_same_on_records(native, buf, check_crc, dispatch_after):
    pure, got = both(buf, check_crc=check_crc, dispatch_after=dispatch_after)
    assert got == pure


@SETTINGS
@given(st.data(), segment(), st.booleans())
def test_decode_run_same_on_corrupted(native, data, buf, check_crc):
    bad = data.draw(corrupted(buf))
    pure, got = both(bad, check_crc=check_crc)
    assert got == pure


NUMERIC = ("queue_id", "queue_offset", "phys", "size", "store_ts", "sys_flag", "tags_code")


@SETTINGS
@given(st.data(), segment(), st.booleans(), st.sampled_from([-1, 0, 500]))
def test_decode_run_arrays_hold_the_lists(native, data, buf, check_crc, dispatch_after):
    """With arrays (the rebuild's decode), both engines give the numeric columns as int64 arrays holding
    what the lists hold, the other columns as they are, and no by_queue; on corrupted bytes too."""
    if data.draw(st.booleans()):
        buf = data.draw(corrupted(buf))
    lists = as_plain(B.decode_run_py(buf, 0, len(buf), check_crc, DELAY_LEVELS, dispatch_after))
    for fn in (B.decode_run_py, B.decode_run_native):
        done, after, last, cols = fn(buf, 0, len(buf), check_crc, DELAY_LEVELS, dispatch_after, arrays=True)
        assert (done, after, last) == lists[:3]
        if lists[3] is None:
            assert cols is None
            continue
        assert cols.by_queue is None
        for name in COLUMNS:
            got = getattr(cols, name)
            if name in NUMERIC:
                assert got.dtype == np.int64 and got.tolist() == lists[3][name], (fn, name)
            elif name != "by_queue":
                assert got == lists[3][name], (fn, name)


@SETTINGS
@given(st.data(), segment())
def test_decode_run_same_inside_a_window(native, data, buf):
    # a run that starts inside the buffer and must end by a limit short of its end
    pos = data.draw(st.integers(0, len(buf)))
    limit = data.draw(st.integers(pos, len(buf)))
    pure, got = both(bad := data.draw(corrupted(buf)) if data.draw(st.booleans()) else buf, pos, min(limit, len(bad)))
    assert got == pure


@SETTINGS
@given(st.binary(max_size=400), st.booleans())
def test_decode_run_same_on_random_bytes(native, buf, check_crc):
    pure, got = both(buf, check_crc=check_crc)
    assert got == pure


def test_delay_of_the_schedule_topic(native):
    # a number (capped at the highest level), one past the levels, and one that is not a number: that record
    # ends the run (check_record judges it), the ones before it are dispatched
    recs = b""
    for level in (b"2", b"9", b"x"):
        recs += plain_record(
            topic=SCHEDULE.encode(),
            body=b"b",
            props=b"DELAY\x01" + level + b"\x02TAGS\x01t",
            born_timestamp=1,
            store_timestamp=1000,
            physical_offset=len(recs),
        )
    pure, got = both(recs)
    assert got == pure
    done, _, _, cols = got
    assert done == 2
    assert cols["tags_code"] == [1000 + DELAY_LEVELS[1], 1000 + DELAY_LEVELS[-1]]


def test_absurd_sizes_allocate_nothing_big(native):
    # a TOTALSIZE of 2 GiB at the start of a small buffer: nothing decoded, no error, nothing allocated
    for size in (0x7FFFFFFF, -1, 0, 91):
        buf = struct.pack(">ii", size, R.MAGIC_V2) + bytes(100)
        assert both(buf) == ((0, 0, 0, None), (0, 0, 0, None))


# ---------------------------------------------------------------- verify


def _verify(buf: bytes, segment_size: int, pure: bool, crc_wanted: bool):
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "commitlog"))
        with open(os.path.join(root, "commitlog", "0" * 20), "wb") as fh:
            fh.write(buf[:segment_size].ljust(segment_size, b"\0"))
        cfg = StoreConfig(mapped_file_size_commit_log=segment_size, enabled_append_prop_crc=crc_wanted)
        with engine.using("pure" if pure else "native"):
            v = Verifier(root, cfg)
            v.check_commitlog()
        records = [
            (phys, {k: getattr(v.records.get(phys), k) for k in Record.__slots__}) for phys in v.records.offsets()
        ]
        return v.problems, v.checked, records, v.max_offset


@SETTINGS
@given(st.data(), segment(), st.booleans(), st.booleans())
def test_verify_same_records_and_problems(native, data, buf, corrupt, crc_wanted):
    if corrupt:
        buf = data.draw(corrupted(buf))
    size = max(len(buf), 100) + 8
    assert _verify(buf, size, False, crc_wanted) == _verify(buf, size, True, crc_wanted)
