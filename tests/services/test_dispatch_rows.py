"""services.dispatch_rows: what a run of records makes, against expectations written out by hand from
RocketMQ's rules (CommitLogDispatcherBuildConsumeQueue: a unit for NOT 0x0 and COMMIT 0x8 only;
IndexService.buildIndex: UNIQ_KEY then each KEYS token, nothing for ROLLBACK 0xC, and nothing for a record
below the last file's endPhyOffset)."""

import numpy as np

from rocketstore.services.dispatch_rows import index_entries, index_entry_counts, index_rows, unit_rows
from tests._index_ref import index_key_hash

#            topic  queue  sysFlag  UNIQ_KEY  KEYS
ROWS = [
    ("A", 0, 0x00, "u0", "k0"),  # normal
    ("A", 1, 0x04, "u1", "k1 k1b"),  # prepared: indexed, no unit
    ("B", 0, 0x08, None, "k2"),  # committed
    ("A", 0, 0x0C, "u3", "k3"),  # rolled back: nothing
    ("A", 0, 0x31, "u4", ""),  # normal, IPv6 hosts and compressed
    ("B", 0, 0xBC, "u5", "k5"),  # rolled back with IPv6 hosts and the inner-batch bit
    ("A", 1, 0x88, None, " k6  k6b "),
]  # committed, empty tokens skipped


def cols(rows):
    return [list(c) for c in zip(*rows)]


def test_unit_rows_by_queue():
    topics, qids, flags, _, _ = cols(ROWS)
    assert unit_rows(topics, qids, flags) == {("A", 0): [0, 4], ("B", 0): [2], ("A", 1): [6]}
    assert unit_rows(topics, qids, np.array(flags, dtype=np.int32)) == {("A", 0): [0, 4], ("B", 0): [2], ("A", 1): [6]}
    assert unit_rows([], [], []) == {}


def test_index_rows_in_build_index_order():
    topics, _, flags, uniqs, keys = cols(ROWS)
    assert index_rows(topics, uniqs, keys, flags) == (
        ["A#u0", "A#k0", "A#u1", "A#k1", "A#k1b", "B#k2", "A#u4", "A#k6", "A#k6b"],
        [0, 0, 1, 1, 1, 2, 4, 6, 6],
    )


def test_index_rows_skip_what_is_indexed_already():
    """buildIndex: `if (msg.getCommitLogOffset() < endPhyOffset) return;`, endPhyOffset moving to each
    record that put keys; a replayed record (a smaller offset after a larger one) puts none."""
    topics, uniqs, keys, flags = ["T"] * 5, ["a", "b", "c", "d", "e"], [""] * 5, [0] * 5
    phys = [100, 200, 150, 200, 300]
    assert index_rows(topics, uniqs, keys, flags, phys, 120) == (["T#b", "T#d", "T#e"], [1, 3, 4])
    # a row without keys does not move endPhyOffset
    assert index_rows(topics, [None, "b", "c"], [""] * 3, [0] * 3, [300, 200, 250], 0) == (["T#b", "T#c"], [1, 2])


def test_index_entries_hashes_and_owners():
    topics, _, flags, uniqs, keys = cols(ROWS)
    phys = [1000 * (i + 1) for i in range(len(ROWS))]
    stamps = [7 + i for i in range(len(ROWS))]
    hashes, p, t, last = index_entries(topics, uniqs, keys, flags, phys, stamps)
    owner = [0, 0, 1, 1, 1, 2, 4, 6, 6]
    assert hashes.tolist() == [
        index_key_hash(k) for k in ["A#u0", "A#k0", "A#u1", "A#k1", "A#k1b", "B#k2", "A#u4", "A#k6", "A#k6b"]
    ]
    assert p.tolist() == [phys[i] for i in owner] and t.tolist() == [stamps[i] for i in owner] and last == 6
    hashes, p, t, last = index_entries(["T"], [None], [""], [0], [5], [6])
    assert (len(hashes), len(p), len(t), last) == (0, 0, 0, -1)


def test_index_entry_counts_are_the_keys_per_row():
    topics, _, flags, uniqs, keys = cols(ROWS)
    counts = index_entry_counts(uniqs, keys, np.array(flags, dtype=np.int32))
    assert counts.tolist() == [2, 3, 1, 0, 1, 0, 2]
    _, owner = index_rows(topics, uniqs, keys, flags)
    assert counts.tolist() == np.bincount(owner, minlength=len(ROWS)).tolist()
