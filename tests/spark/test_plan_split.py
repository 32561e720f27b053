"""How a batch read is cut into partitions (spark.plan.split), without Spark: whatever the cut, the
partitions read every offset of every range once, in the ranges' order."""

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.spark.plan import MIN_PARTITION_ROWS, split
from rocketstore.spark.queue_read import QueueRange


def offsets(parts):
    """The offsets the partitions read, in partition order, as [topic, queue, first, end] runs (adjacent
    pieces of one queue joined)."""
    runs = []
    for r in (r for p in parts for r in p):
        assert r.count > 0
        if runs and runs[-1][:2] == [r.topic, r.queue_id] and runs[-1][3] == r.start:
            runs[-1][3] = r.end
        else:
            runs.append([r.topic, r.queue_id, r.start, r.end])
    return runs


def wanted(ranges):
    return [[r.topic, r.queue_id, r.start, r.end] for r in ranges if r.count]


ranges_st = st.lists(st.tuples(st.integers(0, 300), st.integers(0, 400_000)), min_size=0, max_size=10).map(
    lambda xs: [QueueRange(f"T{i % 3}", i, a, a + n) for i, (a, n) in enumerate(xs)]
)


@settings(max_examples=60, deadline=None)
@given(ranges_st, st.integers(1, 16))
def test_packed_partitions_cover_the_ranges_in_order_evenly(ranges, parallelism):
    parts = split(ranges, None, parallelism)
    assert offsets(parts) == wanted(ranges)
    total = sum(r.count for r in ranges)
    # never more partitions than the session's cores, nor one for fewer than MIN_PARTITION_ROWS rows
    assert len(parts) <= max(1, min(parallelism, total // MIN_PARTITION_ROWS)) if total else parts == []
    sizes = [sum(r.count for r in p) for p in parts]
    assert all(sizes)
    assert max(sizes, default=0) - min(sizes, default=0) <= len(parts)  # equal but for rounding


def test_two_cores_get_two_halves_across_queues():
    ranges = [QueueRange("A", q, 0, 250_000) for q in range(4)] + [QueueRange("B", 0, 10, 10)]  # B-0 is empty
    parts = split(ranges, None, 2)
    assert [[(r.queue_id, r.start, r.end) for r in p] for p in parts] == [
        [(0, 0, 250_000), (1, 0, 250_000)],
        [(2, 0, 250_000), (3, 0, 250_000)],
    ]


def test_a_range_is_cut_where_a_partition_fills_up():
    parts = split([QueueRange("A", 0, 100, 300_100), QueueRange("A", 1, 0, 100_000)], None, 2)
    assert [[(r.queue_id, r.start, r.end) for r in p] for p in parts] == [
        [(0, 100, 200_100)],
        [(0, 200_100, 300_100), (1, 0, 100_000)],
    ]


def test_a_small_read_is_one_partition():
    assert len(split([QueueRange("A", q, 0, 1000) for q in range(8)], None, 4)) == 1


def test_without_a_hint_or_with_min_partitions_the_kafka_rules_hold():
    ranges = [QueueRange("A", 0, 0, 90), QueueRange("A", 1, 0, 10), QueueRange("A", 2, 5, 5)]
    assert split(ranges, None, None) == [[ranges[0]], [ranges[1]]]  # one per non-empty range
    assert split(ranges, 2, 8) == [[ranges[0]], [ranges[1]]]  # minPartitions decides, not the hint
    cut = split(ranges, 10, 8)  # pieces in proportion to each range's size
    assert [(p[0].queue_id, p[0].start, p[0].end) for p in cut] == [(0, s, s + 10) for s in range(0, 90, 10)] + [
        (1, 0, 10)
    ]
