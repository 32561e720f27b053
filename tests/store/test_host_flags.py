"""A caller's sys_flag with IPv6 host bits (0x10 born host, 0x20 store host) that its hosts do not match: the
bits say how long the host fields are, so the stored record keeps the bits of the hosts it holds (RocketMQ
sets them only from the addresses). Before, a PUT_OK message with a stray bit was unreadable: every message
put must come back, with its body and hosts, and verify must find nothing, on both engines (the native put
paths hand such messages to the Python one)."""

import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.maintenance.verify import verify_store

HOSTS = [None, "10.0.0.7:1234", "[2001:db8::5]:10911"]
FLAGS = [0, 0x10, 0x20, 0x30, 0x11, 0x2]
BATCH = {"queue.type": "BatchCQ"}
# RocketMQ's sizes but for the batch ConsumeQueue (300,000 units by default): verify reads every unit of a
# file, and a default-size one took 0.6 s of each example; a few units are all an example writes
SIZES = dict(mapped_file_size_batch_consume_queue=1_000 * 46)


def _v6(host):
    return host is not None and host.startswith("[")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["put", "put_batch", "batch_topic"]),
            st.sampled_from(FLAGS),
            st.sampled_from(HOSTS),
            st.sampled_from(HOSTS),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_stray_host_bits_never_make_an_unreadable_record(ops):
    with tempfile.TemporaryDirectory() as root:
        want = {"T": [], "B": []}
        with MessageStore.open(root, StoreConfig(**SIZES)) as s:
            s.create_topic("B", queues=1, attributes=BATCH)
            for i, (kind, flag, born, store) in enumerate(ops):
                msg = Message(
                    topic="B" if kind == "batch_topic" else "T",
                    body=f"m{i}".encode(),
                    sys_flag=flag,
                    born_host=born,
                    store_host=store,
                    keys=f"k{i}",
                )
                r = s.put_batch([msg], 0) if kind == "put_batch" else s.put(msg, 0)
                if r.ok:
                    want[msg.topic].append((msg.body, born, store))
            for topic, expected in want.items():
                got = s.get("g", topic, 0, 0, 64).messages if expected else []
                assert [m.body for m in got] == [b for b, _, _ in expected]
                for m, (_, born, store) in zip(got, expected):
                    assert bool(m.sys_flag & 0x10) == _v6(born)
                    assert bool(m.sys_flag & 0x20) == _v6(store)
        report = verify_store(root, StoreConfig(**SIZES))
        assert report["ok"], report["problems"]
