"""A store handed over between RocketMQ 5.3.3's own broker and `rocketstore serve`, both ways, under RocketMQ's
Java client (issue #26). java/HandoverClients.java's "write" phase runs against the first broker and leaves a
push consumer group that consumed half a topic, a message in %RETRY%group, one in %DLQ%group, a half message
whose producer is gone, a delayed message still waiting and a subscription group with non-default settings; the
first broker is stopped cleanly, the second opens the same store directory and the "resume" phase must get
exactly what is owed: the unconsumed half of the topic (nothing consumed before), the retry, the DLQ message,
the transaction once its check-back is answered, the delayed message once, nothing for the group whose
settings forbid consuming. The store is read (read-only, by rocketstore) at the hand-over and at the end.

Skipped, saying why, without the RocketMQ jars and broker beside the repository (../shared/java/rocketmq-5.3.3,
see its README) or without a JDK."""

import json
import os
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from serve_harness import JAVA_DIR, Serve, events_of, mqadmin_out, of, queue_messages, run_java

from rocketstore import MessageStore
from rocketstore.broker.address import free_port_pair

# Both brokers read these (broker.conf). Short delay levels: the retry waits level 2, longer than its consumer
# takes to shut down; the delayed message level 3, long enough to wait across the hand-over. Check-backs of a half
# message 1 s old, every 3 s, with room for the checks RocketMQ's broker makes while no producer of the group is
# there (each counts towards transactionCheckMax). RocketMQ's broker writes its op records (a transaction's end)
# in batches, every transactionOpBatchInterval (3 s): a check round before that asks the producer again about a
# transaction it ended, and commits it again when the answer is commit; its batches here come well before the
# next round. Small files (RocketMQ's broker allocates its 1 GiB commit log segment and 400 MiB index file in
# full); both brokers need the sizes the files have.
BROKER_CONF = {
    "brokerName": "broker-a",
    "mappedFileSizeCommitLog": str(16 << 20),
    "mappedFileSizeConsumeQueue": str(6_000 * 20),
    "maxHashSlotNum": "5000",
    "maxIndexNum": "20000",
    "messageDelayLevel": "1s 10s 40s",
    "transactionTimeOut": "1000",
    "transactionCheckInterval": "3000",
    "transactionCheckMax": "1000",
    "transactionOpBatchInterval": "200",
}
SETTINGS = {"consumeEnable": False, "consumeBroadcastEnable": False, "consumeMessageOrderly": True,
            "retryMaxTimes": 3, "retryQueueNums": 2, "whichBrokerWhenConsumeSlowly": 0}  # fmt: skip
TOPICS = ["HTopic", "HRetry", "HDlq", "HTx", "HDelay", "%RETRY%HRetryGroup", "%DLQ%HDlqGroup",
          "RMQ_SYS_TRANS_HALF_TOPIC", "SCHEDULE_TOPIC_XXXX"]  # fmt: skip


class RocketBroker:
    """RocketMQ 5.3.3's name server and broker on root/store (start-broker.sh; a clean stop: its shutdown hooks
    persist offsets, delay offsets and the commit log)."""

    def __init__(self, root: Path):
        script = JAVA_DIR / "start-broker.sh"
        if not script.is_file():
            pytest.skip(f"no RocketMQ broker here: {script} is absent (see shared/java's README)")
        cp = subprocess.run(["bash", str(JAVA_DIR / "classpath.sh"), "broker"], capture_output=True, text=True)
        missing = [p for p in cp.stdout.strip().split(":") if not os.path.exists(p)]
        if cp.returncode != 0 or missing:
            pytest.skip(f"the broker's jars of {JAVA_DIR / 'README.md'} are not all installed: {missing[:3]}")
        self.root, self.ns_port, self.broker_port = root, free_port_pair(), free_port_pair()
        self.logdir = root / f"rmqlogs-{self.ns_port}"

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    def start(self) -> None:
        conf = [f"{k}={v}" for k, v in BROKER_CONF.items()]
        r = subprocess.run(
            ["bash", str(JAVA_DIR / "start-broker.sh"), str(self.root / "store"), str(self.ns_port),
             str(self.broker_port), *conf],
            capture_output=True, text=True, timeout=180, env=dict(os.environ, RMQ_HEAP="512m"),
        )  # fmt: skip
        assert r.returncode == 0, f"RocketMQ's broker did not start:\n{r.stderr[-3000:]}"

    def stop(self) -> None:
        r = subprocess.run(["bash", str(JAVA_DIR / "stop-broker.sh"), str(self.logdir)], capture_output=True,
                           text=True, timeout=120)  # fmt: skip
        assert r.returncode == 0, r.stderr


def serve_on(root: Path) -> Serve:
    serve = Serve(root)
    (root / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in BROKER_CONF.items()))
    return serve


def read_store(path: Path) -> dict:
    """Every message of TOPICS by (topic, queue), the groups' offsets, the subscription groups' file."""
    with MessageStore.open(str(path), read_only=True) as s:
        messages = queue_messages(s, TOPICS)
        groups = (("HGroup", "HTopic"), ("HRetryGroup", "HRetry"), ("HRetryGroup", "%RETRY%HRetryGroup"))
        offsets = {(g, t, q): s.consumer_offsets.query(g, t, q) for g, t in groups for q in range(2)}
    table = json.loads((path / "config" / "subscriptionGroup.json").read_text())["subscriptionGroupTable"]
    return {"messages": messages, "offsets": offsets, "groups": table}


def keys(store: dict, topic: str, queue: int | None = None) -> list[str]:
    return sorted(
        m.properties.get("KEYS")
        for (t, q), ms in store["messages"].items()
        if t == topic and queue in (None, q)
        for m in ms
    )


def run_phase(classpath: str, root: Path, namesrv: str, phase: str) -> list[dict]:
    home = root / f"home-{phase}"
    home.mkdir()
    r = run_java(classpath, home, "HandoverClients", namesrv, phase)
    (root / f"{phase}.stdout").write_text(r.stdout)
    (root / f"{phase}.stderr").write_text(r.stderr)
    return events_of(r)


@pytest.fixture(scope="module", params=["rocketmq-to-serve", "serve-to-rocketmq"])
def handover(request, java_classpath, tmp_path_factory):
    """The write phase on one broker, the resume phase on the other, the same store: (write events, resume
    events, the store at the hand-over, the store at the end, rocketstore's log)."""
    root = tmp_path_factory.mktemp(request.param)
    rocket, serve = RocketBroker(root), serve_on(root)
    first, second = (rocket, serve) if request.param == "rocketmq-to-serve" else (serve, rocket)
    first.start()
    try:
        written = run_phase(java_classpath, root, first.namesrv, "write")
    finally:
        first.stop()
    at_handover = read_store(root / "store")
    second.start()
    try:
        resumed = run_phase(java_classpath, root, second.namesrv, "resume")
    finally:
        second.stop()
        (root / "serve.log").write_text("".join(serve.lines))
    return written, resumed, at_handover, read_store(root / "store"), "".join(serve.lines)


def test_both_phases_ran_without_errors(handover):
    # every scenario of both phases, and the wait for the broker's registration, went without an exception
    errors = [e for events in handover[:2] for e in events if e["event"] == "error"]
    assert not errors, "\n".join(f"{e['scenario']}: {e['trace']}" for e in errors)


def received(events, scenario) -> list[dict]:
    return [e["message"] for e in of(events, scenario, "received")]


def test_consumer_group_resumes_from_its_committed_offsets(handover):
    written, resumed, before, after, _ = handover
    sent = [e["key"] for e in of(written, "offsets", "sent")]
    assert sent == [f"first-{i}" for i in range(10)] + [f"second-{i}" for i in range(10)]
    assert Counter(m["key"] for m in received(written, "offsets")) == Counter(sent[:10])
    assert of(written, "offsets", "committed")[0]["done"]
    # the offsets at the hand-over: each queue past its first-* messages
    per_queue = Counter(m["queueId"] for m in received(written, "offsets"))
    assert {q: before["offsets"][("HGroup", "HTopic", q)] for q in range(2)} == {q: per_queue[q] for q in range(2)}
    # the other broker delivers the second half, each message once, none of the first
    got = received(resumed, "offsets")
    assert Counter(m["key"] for m in got) == Counter(sent[10:])
    assert all(m["body"] == m["key"] + " body" for m in got)
    assert of(resumed, "offsets", "committed")[0]["done"]
    assert {q: after["offsets"][("HGroup", "HTopic", q)] for q in range(2)} == {q: 10 for q in range(2)}


def test_retry_message_is_redelivered(handover):
    written, resumed, before, after, _ = handover
    (failed,) = received(written, "retry")
    assert (failed["key"], failed["reconsumeTimes"]) == ("retry-0", 0)
    assert of(written, "retry", "offset_moved")[0]["done"]
    assert of(written, "retry", "in_retry_topic")[0]["done"]
    assert keys(before, "%RETRY%HRetryGroup") == ["retry-0"]
    # the failed message's offset was committed past it at the consumer's shutdown: the next broker hands out
    # only the retry
    assert before["offsets"][("HRetryGroup", "HRetry", 0)] == 1
    assert before["offsets"][("HRetryGroup", "%RETRY%HRetryGroup", 0)] in (-1, 0)  # not consumed yet
    (again,) = received(resumed, "retry")
    assert (again["key"], again["topic"], again["reconsumeTimes"], again["msgId"]) == (
        "retry-0", "HRetry", 1, failed["msgId"],
    )  # fmt: skip
    # the delay levels' progress was handed over with the store: the retry was not delivered twice
    assert keys(after, "%RETRY%HRetryGroup") == ["retry-0"]


def test_dead_letter_is_readable(handover):
    written, resumed, before, after, _ = handover
    (sent,) = of(written, "dlq", "sent")
    assert of(written, "dlq", "in_dlq")[0]["done"]
    assert keys(before, "%DLQ%HDlqGroup") == ["dlq-0"]
    (dead,) = received(resumed, "dlq")
    assert (dead["key"], dead["topic"], dead["body"], dead["msgId"]) == ("dlq-0", "%DLQ%HDlqGroup", "dlq-0 body",
                                                                        sent["msgId"])  # fmt: skip
    assert keys(after, "%DLQ%HDlqGroup") == ["dlq-0"]


def test_open_transaction_is_checked_back_and_committed(handover):
    written, resumed, before, after, _ = handover
    (sent,) = of(written, "transaction", "sent")
    assert (sent["key"], sent["status"], sent["local"]) == ("tx-open", "SEND_OK", "UNKNOW")
    assert keys(before, "HTx") == []  # still a half message at the hand-over
    assert "tx-open" in keys(before, "RMQ_SYS_TRANS_HALF_TOPIC")
    # a new producer of the group (it sends a transaction of its own, committed at once) is asked about tx-open
    # and answers commit: both messages come, once each
    (new,) = of(resumed, "transaction", "sent")
    assert (new["key"], new["status"], new["local"]) == ("tx-new", "SEND_OK", "COMMIT_MESSAGE")
    checked = of(resumed, "transaction", "checked")
    assert "tx-open" in {e["key"] for e in checked} and {e["answer"] for e in checked} == {"COMMIT_MESSAGE"}
    got = {m["key"]: m for m in received(resumed, "transaction")}
    assert Counter(m["key"] for m in received(resumed, "transaction")) == Counter(["tx-open", "tx-new"])
    assert (got["tx-open"]["body"], got["tx-open"]["msgId"]) == ("tx-open body", sent["msgId"])
    assert keys(after, "HTx") == ["tx-new", "tx-open"]


def test_delayed_message_is_delivered_once(handover):
    written, resumed, before, after, _ = handover
    (sent,) = of(written, "delay", "sent")
    assert keys(before, "HDelay") == []  # still waiting at the hand-over
    assert keys(before, "SCHEDULE_TOPIC_XXXX", 2) == ["delayed-0"]  # level 3's queue
    (delivered,) = received(resumed, "delay")
    assert (delivered["key"], delivered["topic"], delivered["msgId"]) == ("delayed-0", "HDelay", sent["msgId"])
    assert keys(after, "HDelay") == ["delayed-0"]


def test_subscription_group_settings_carry_over(handover):
    written, resumed, before, after, _ = handover
    (at_write,) = of(written, "settings", "settings")
    (at_resume,) = of(resumed, "settings", "settings")
    expected = {"scenario": "settings", "event": "settings", **SETTINGS}
    assert at_write == expected and at_resume == expected
    for store in (before, after):
        assert {k: store["groups"]["HSettingsGroup"][k] for k in SETTINGS} == SETTINGS
    # mqadmin getConsumerConfig on the other broker: one "field = value" line per setting
    shown = dict(re.findall(r"^(\w+)\s+=\s+(.*?)\s*$", mqadmin_out(resumed, "getConsumerConfig"), re.M))
    assert {k: shown.get(k) for k in SETTINGS} == {k: str(v).lower() for k, v in SETTINGS.items()}
    # consumeEnable=false: the group's consumer got nothing of HTopic from the other broker
    assert received(resumed, "settings") == []


def test_rocketstore_served_every_request(handover):
    # rocketstore's log (INFO), on either side of the hand-over: no request went unanswered, no error, no traceback
    lines = handover[4].splitlines()
    assert any("rocketstore serve: store" in line for line in lines)
    bad = [i for i, line in enumerate(lines) if re.search(r"unsupported request code|Traceback| ERROR ", line)]
    assert not bad, "\n".join("\n".join(lines[i : i + 15]) for i in bad[:5])
