"""config/*.json that is valid JSON of the wrong shape (issue #17, point 12).

RocketMQ's ConfigManager.load decodes the file and, on any exception, loads `<file>.bak` instead; only when
that fails too does the broker refuse to start. The store does the same for each of its config files
(topics.json and consumerFilter.json at open, consumerOffset.json on first use, sparkSinks.json at a sink
commit): a good .bak is used, else the error names the file and what is wrong with it, with no
AttributeError, KeyError, OverflowError or RecursionError escaping, read-only opens included; the command
line says it in one line."""

import json
import os
import subprocess
import sys

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import StoreOpenError

DEEP = '{"a":' * 100_000 + "1" + "}" * 100_000  # beyond json's recursion limit
DEEP_ARRAY = "[" * 100_000 + "]" * 100_000


def write(root, name, text):
    with open(os.path.join(root, "config", name), "w", encoding="utf-8") as fh:
        fh.write(text)


def cli(*args):
    p = subprocess.run([sys.executable, "-m", "rocketstore.cli", *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


# ------------------------------------------------------------------------------------------ topics.json
TOPICS_BAD = {
    "list": "[]",
    "string": '"topics"',
    "table is a list": '{"topicConfigTable": []}',
    "config is a list": '{"topicConfigTable": {"B": [1, 2]}}',
    "string queue count": '{"topicConfigTable": {"B": {"writeQueueNums": "2"}}}',
    "huge queue count": '{"topicConfigTable": {"B": {"writeQueueNums": 99999999999999999999999}}}',
    "infinite queue count": '{"topicConfigTable": {"B": {"readQueueNums": 1e999}}}',
    "attributes a string": '{"topicConfigTable": {"B": {"attributes": "queue.type=BatchCQ"}}}',
    "queue type a number": '{"topicConfigTable": {"B": {"attributes": {"queue.type": 7}}}}',
    "deep": DEEP,
    "deep array": DEEP_ARRAY,
    "empty": "",
}


def topics_store(root) -> str:
    """A store with a batch-ConsumeQueue topic B of 2 queues; topics.json.bak is the first version."""
    with MessageStore.open(str(root)) as s:
        s.create_topic("B", queues=2, attributes={"queue.type": "BatchCQ"})
        s.create_topic("B", queues=2)  # the second write keeps the first as .bak; both say BatchCQ
        s.put_batch([Message("B", b"x")], queue_id=1)
    return str(root)


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.parametrize("shape", sorted(TOPICS_BAD))
def test_topics_json_falls_back_to_the_bak(tmp_path, shape, read_only):
    root = topics_store(tmp_path / "s")
    write(root, "topics.json", TOPICS_BAD[shape])
    with MessageStore.open(root, read_only=read_only) as s:
        cfg = s.topic_configs["B"]
        assert cfg["writeQueueNums"] == 2 and cfg["attributes"] == {"queue.type": "BatchCQ"}
        assert [m.body for m in s.get("g", "B", 1, 0).unpacked()] == [b"x"]  # read through the batch ConsumeQueue


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.parametrize("shape", sorted(TOPICS_BAD))
def test_topics_json_without_a_usable_bak_is_a_clear_error(tmp_path, shape, read_only):
    root = topics_store(tmp_path / "s")
    path = os.path.join(root, "config", "topics.json")
    write(root, "topics.json", TOPICS_BAD[shape])
    write(root, "topics.json.bak", "[]")
    with pytest.raises(StoreOpenError) as e:
        MessageStore.open(root, read_only=read_only)
    text = str(e.value)
    assert f"{path}: " in text and f"{path}.bak: the file must be a JSON object, not an array" in text
    assert "\n" not in text and len(text) < 1000


@pytest.mark.parametrize("shape", ["list", "string queue count", "deep"])
@pytest.mark.parametrize("command", [["inspect"], ["topics"], ["recover"], ["verify"]])
def test_topics_json_cli_one_line(tmp_path, shape, command):
    root = topics_store(tmp_path / "s")
    write(root, "topics.json", TOPICS_BAD[shape])
    os.remove(os.path.join(root, "config", "topics.json.bak"))
    code, out, err = cli(*command, root)
    if command == ["verify"]:  # a problem in the report, not an error
        assert code == 1 and "Traceback" not in out + err and "sound" not in out
        report = json.loads(cli("verify", root, "--json")[1])
        assert [p["file"] for p in report["problems"]] == [os.path.join("config", "topics.json")]
        return
    assert code == 1 and "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "topics.json" in lines[0], err


def test_the_error_names_what_is_wrong(tmp_path):
    root = topics_store(tmp_path / "s")
    os.remove(os.path.join(root, "config", "topics.json.bak"))
    for text, wanted in [
        ('{"topicConfigTable": {"B": {"writeQueueNums": "2"}}}', "topic 'B': writeQueueNums must be an integer"),
        ('{"topicConfigTable": {"B": {"readQueueNums": 2147483648}}}', "readQueueNums 2147483648 is out of range"),
        ('{"topicConfigTable": {"B": {"perm": -1}}}', "perm -1 is out of range"),
        (DEEP, "JSON nested too deeply"),
    ]:
        write(root, "topics.json", text)
        with pytest.raises(StoreOpenError, match=wanted):
            MessageStore.open(root, read_only=True)


# ----------------------------------------------------------------------------------- consumerOffset.json
OFFSETS_BAD = {
    "list": "[1, 2]",
    "table is a list": '{"offsetTable": [1]}',
    "queues a list": '{"offsetTable": {"T@g": [5]}}',
    "string offset": '{"offsetTable": {"T@g": {"0": "5"}}}',
    "fraction offset": '{"offsetTable": {"T@g": {"0": 5.5}}}',
    "infinite offset": '{"offsetTable": {"T@g": {"0": 1e999}}}',
    "huge offset": '{"offsetTable": {"T@g": {0: 9223372036854775808}}}',
    "queue id not a number": '{"offsetTable": {"T@g": {"q": 5}}}',
    "huge queue id": '{"offsetTable": {"T@g": {"4294967296": 5}}}',
    "deep": DEEP,
}


def offsets_store(root) -> str:
    """Group g committed offset 1, then 2, on T/0: consumerOffset.json.bak holds 1."""
    with MessageStore.open(str(root)) as s:
        for body in (b"a", b"b", b"c"):
            s.put(Message("T", body), queue_id=0)
        c = s.consumer("g", "T")
        for _ in range(2):
            c.positions[0] = c.positions.get(0, 0) + 1
            c.commit()
    return str(root)


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.parametrize("shape", sorted(OFFSETS_BAD))
def test_consumer_offsets_fall_back_to_the_bak(tmp_path, shape, read_only):
    root = offsets_store(tmp_path / "s")
    write(root, "consumerOffset.json", OFFSETS_BAD[shape])
    with MessageStore.open(root, read_only=read_only) as s:
        assert s.consumer_offsets.query("g", "T", 0) == 1


@pytest.mark.parametrize("shape", sorted(OFFSETS_BAD))
def test_consumer_offsets_without_a_usable_bak(tmp_path, shape):
    root = offsets_store(tmp_path / "s")
    path = os.path.join(root, "config", "consumerOffset.json")
    write(root, "consumerOffset.json", OFFSETS_BAD[shape])
    write(root, "consumerOffset.json.bak", '{"offsetTable": {"T@g": {"0": "1"}}}')
    with MessageStore.open(root, read_only=True) as s:
        with pytest.raises(StoreOpenError) as e:
            s.consumer("g", "T").poll()
    assert f"{path}: " in str(e.value) and f"{path}.bak: offsetTable['T@g'][0] must be an integer" in str(e.value)
    code, out, err = cli("queues", root, "T")
    assert code == 1 and "Traceback" not in out + err and len(err.strip().splitlines()) == 1, err


def test_fastjson_offsets_still_read(tmp_path):
    """RocketMQ's own spelling (unquoted integer keys) stays readable."""
    root = offsets_store(tmp_path / "s")
    write(root, "consumerOffset.json", '{"offsetTable":{"T@g":{0:2,1:7}}}')
    with MessageStore.open(root, read_only=True) as s:
        assert s.consumer_offsets.query("g", "T", 0) == 2 and s.consumer_offsets.query("g", "T", 1) == 7


# ----------------------------------------------------------------------------------- consumerFilter.json
FILTERS_BAD = {
    "list": "[]",
    "by topic a list": '{"filterDataByTopic": []}',
    "groups a string": '{"filterDataByTopic": {"T": {"groupFilterData": "g"}}}',
    "missing expression": '{"filterDataByTopic": {"T": {"groupFilterData": {"g": {"consumerGroup": "g", '
    '"topic": "T"}}}}}',
    "string born time": '{"filterDataByTopic": {"T": {"groupFilterData": {"g": {"consumerGroup": "g", '
    '"topic": "T", "expression": "a > 1", "bornTime": "5"}}}}}',
    "bitPos a number": '{"filterDataByTopic": {"T": {"groupFilterData": {"g": {"consumerGroup": "g", '
    '"topic": "T", "expression": "a > 1", "bloomFilterData": {"bitPos": 3}}}}}}',
    "huge bit": '{"filterDataByTopic": {"T": {"groupFilterData": {"g": {"consumerGroup": "g", '
    '"topic": "T", "expression": "a > 1", "bloomFilterData": {"bitPos": [1e999], "bitNum": 64}}}}}}',
    "deep": DEEP,
}
FILTER_CONFIG = dict(enable_consume_queue_ext=True, enable_calc_filter_bit_map=True)


def filters_store(root) -> str:
    with MessageStore.open(str(root), config=StoreConfig(**FILTER_CONFIG)) as s:
        s.register_filter("g", "T", "a > 1")
        s.register_filter("g2", "T", "b = 2")  # the second write keeps the first as .bak
    return str(root)


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.parametrize("shape", sorted(FILTERS_BAD))
def test_consumer_filters_fall_back_to_the_bak(tmp_path, shape, read_only):
    root = filters_store(tmp_path / "s")
    write(root, "consumerFilter.json", FILTERS_BAD[shape])
    with MessageStore.open(root, config=StoreConfig(**FILTER_CONFIG), read_only=read_only) as s:
        assert s._filters.get("T", "g").expression == "a > 1"


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.parametrize("shape", sorted(FILTERS_BAD))
def test_consumer_filters_without_a_usable_bak(tmp_path, shape, read_only):
    root = filters_store(tmp_path / "s")
    path = os.path.join(root, "config", "consumerFilter.json")
    write(root, "consumerFilter.json", FILTERS_BAD[shape])
    os.remove(path + ".bak")
    with pytest.raises(StoreOpenError, match="cannot read the consumer filters: " + path):
        MessageStore.open(root, config=StoreConfig(**FILTER_CONFIG), read_only=read_only)


# -------------------------------------------------------------------------------------- sparkSinks.json
SINKS_BAD = {
    "list": "[]",
    "sinks a list": '{"sinks": []}',
    "sink a number": '{"sinks": {"s": 3}}',
    "string committed": '{"sinks": {"s": {"committed": "4"}}}',
    "intent without offset": '{"sinks": {"s": {"committed": 1, "intent": {"batchId": 2}}}}',
    "deep": DEEP,
}


@pytest.mark.parametrize("shape", sorted(SINKS_BAD))
def test_spark_sink_record_falls_back_to_the_bak_or_says_what_is_wrong(tmp_path, shape):
    from rocketstore.spark import sink as S

    root = str(tmp_path)
    os.makedirs(os.path.join(root, "config"))
    good = {"sinks": {"s": {"committed": 4, "queryId": "q"}}}
    write(root, "sparkSinks.json", SINKS_BAD[shape])
    write(root, "sparkSinks.json.bak", json.dumps(good))
    assert S.load_state(root) == good
    write(root, "sparkSinks.json.bak", SINKS_BAD[shape])
    with pytest.raises(S.SinkError, match=os.path.join(root, "config", "sparkSinks.json")):
        S.load_state(root)


def test_verify_notes_a_fallback_to_the_bak(tmp_path):
    root = topics_store(tmp_path / "s")
    write(root, "topics.json", TOPICS_BAD["list"])
    code, out, err = cli("verify", root, "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"], out + err
    assert any("topics.json.bak instead" in n for n in report["notes"])
