"""get's compiled fast path (get_plain.take_plain) changes no answer: every get over a store that spans
several CommitLog segments, with and without a tag filter and with small transfer limits, answers exactly
as the careful loop alone does (status, next offset, bytes, messages and every field of them)."""

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.read import get_message

TAGS = ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")


def answer(r):
    return (
        r.status,
        r.next_begin_offset,
        r.min_offset,
        r.max_offset,
        r.buffer_total_size,
        r.message_count,
        [m.as_dict() for m in r.messages],
    )


@pytest.mark.parametrize(
    "limits",
    [
        {},
        {
            "max_transfer_bytes_on_message_in_memory": 700,
            "max_transfer_count_on_message_in_memory": 5,
            "max_transfer_bytes_on_message_in_disk": 300,
            "max_transfer_count_on_message_in_disk": 2,
            "total_physical_memory": 40_000,
        },
    ],
)
def test_fast_path_answers_as_the_careful_loop(tmp_path, monkeypatch, native, limits):
    cfg = StoreConfig(
        mapped_file_size_commit_log=16 * 1024,
        mapped_file_size_consume_queue=20 * 150,
        message_index_enable=False,
        **limits,
    )
    with MessageStore.open(str(tmp_path / "s"), cfg) as s:
        for i in range(600):
            body = bytes([i % 251]) * (20 + i % 90)
            assert (
                s.put(
                    Message(topic="T", body=body, tags=TAGS[i % 10] if i % 7 else TAGS[0], keys=f"k{i}"), 0
                ).status.name
                == "PUT_OK"
            )
        s.wait_dispatched()
        cases = [
            (off, n, tags)
            for off in (0, 1, 149, 150, 333, 599, 600, 700)
            for n in (1, 3, 32, 100)
            for tags in (None, "a", "a || c", "zzz", "*")
        ]
        fast = [answer(s.get("g", "T", 0, off, n, tags=tags)) for off, n, tags in cases]
        monkeypatch.setattr(get_message, "take_plain", lambda *a: (0, 0, 0, False))
        careful = [answer(s.get("g", "T", 0, off, n, tags=tags)) for off, n, tags in cases]
    assert fast == careful
    assert any(a[5] > 1 for a in fast) and any(a[0].name == "NO_MATCHED_MESSAGE" for a in fast)
