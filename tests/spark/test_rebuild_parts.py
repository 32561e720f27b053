"""The Spark rebuild's grouping of a segment's units by queue (numpy) against the reference, the rebuild's
own Python loop over dispatch_rows.unit_rows (CommitLogDispatcherBuildConsumeQueue's rule: normal and
committed records get a unit, prepared and rolled-back ones do not)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.maintenance import rebuild as RB
from rocketstore.formats.record import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rocketstore.spark.rebuild_parts import unit_rows

FLAGS = [TRANSACTION_NOT_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE]

rows_st = st.lists(
    st.tuples(
        st.sampled_from(["A", "B", "Topic\u00e9", "A\x00", ""]),
        st.sampled_from([0, 1, 7, 2**31 - 1, -1, -(2**31)]),
        st.sampled_from(FLAGS),
        st.sampled_from([0, 0x10, 0x40]),  # other sysFlag bits beside the transaction type
    ),
    max_size=200,
)


@settings(max_examples=150, deadline=None)
@given(rows_st)
def test_unit_rows_are_the_reference(rows):
    cols = {
        "topic": [r[0] for r in rows],
        "queue_id": np.array([r[1] for r in rows], dtype=np.int32),
        "sys_flag": np.array([r[2] | r[3] for r in rows], dtype=np.int32),
    }
    got = unit_rows(cols)
    want = RB.units_by_queue(cols)
    assert {k: v.tolist() for k, v in got.items()} == want
    assert all(v.dtype == np.int64 for v in got.values())


def test_a_small_case_by_hand():
    cols = {
        "topic": ["A", "B", "A", "A", "B"],
        "queue_id": np.array([1, 0, 1, 2, 0], dtype=np.int32),
        "sys_flag": np.array([0, 0, TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE, 0], dtype=np.int32),
    }
    assert {k: v.tolist() for k, v in unit_rows(cols).items()} == {("A", 1): [0], ("B", 0): [1, 4], ("A", 2): [3]}
