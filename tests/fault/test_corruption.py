"""Random damage to every kind of store file, then every reader (CLI inspect/verify/dump, read-only and
writable opens, get over every queue, key queries): clear errors only, no hang, no over-allocation, and
after damage to a derived file (queues, ext, index, checkpoint) every message still served. The cases run
in a child process (corrupt_driver.py: address space capped, an alarm per case); each prints one JSON line."""

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from rocketstore import Message, MessageStore

from . import workload as W

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corrupt_driver.py")


def build_base(root: str, **config) -> list:
    """A cleanly closed store with every file kind: ~150 KiB of CommitLog over several segments, three
    queues of a plain topic (tags, keys: the index rolls), a batch-ConsumeQueue topic, committed offsets."""
    acked = []
    with MessageStore.open(root, W.config(**config)) as s:
        s.create_topic(W.TOPIC, queues=W.QUEUES)
        s.create_topic(W.BATCH_TOPIC, queues=W.QUEUES, attributes={"queue.type": "BatchCQ"})
        for n in range(240):
            b = W.body(0, n)[:700]
            r = s.put(Message(W.TOPIC, b, tags=f"T{n % 3}", keys=[f"k0-{n}", f"shared{n % 5}"]), queue_id=n % 3)
            assert r.ok
            acked.append((W.TOPIC, n % 3, r.queue_offset, W.sha1(b)))
        for n in range(30):
            bodies = [W.body(1, 10 * n + i)[:300] for i in range(1 + n % 4)]
            r = s.put_batch([Message(W.BATCH_TOPIC, b, tags="B") for b in bodies], queue_id=n % 3)
            assert r.ok
            acked += [(W.BATCH_TOPIC, n % 3, r.queue_offset + i, W.sha1(b)) for i, b in enumerate(bodies)]
        s.consumer_offsets.commit("g", W.TOPIC, {0: 3, 1: 4, 2: 5})
        s.consumer_offsets.commit("g", W.TOPIC, {0: 6})
    return acked


def run_campaign(tmp_path, name: str, seed: int, cases: int, seconds: int, **config) -> list[dict]:
    base = str(tmp_path / f"{name}-base")
    acked = build_base(base, **config)
    acked_json = tmp_path / f"{name}-acked.json"
    acked_json.write_text(json.dumps(acked))
    work = tmp_path / f"{name}-work"
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(DRIVER), os.environ.get("PYTHONPATH", "")]))
    if config:
        env["FAULT_CONFIG"] = json.dumps(config)
    p = subprocess.run(
        [sys.executable, DRIVER, base, str(acked_json), str(work), str(seed), str(cases), str(seconds)],
        capture_output=True,
        text=True,
        env=env,
        timeout=seconds + 120,
    )
    lines = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
    assert p.returncode == 0, f"driver died ({p.returncode}) after {len(lines)} cases: {p.stderr[-2000:]}"
    return lines


def report(cases: list[dict]) -> str:
    bad = [c for c in cases if c.get("failures")]
    return "\n".join(
        f"case {c['case']}: {c.get('kind')} {c.get('file')} {c.get('how')} crashed={c.get('crashed')}: "
        + " | ".join(c["failures"])
        for c in bad[:15]
    )


@pytest.mark.parametrize("name,config", [("plain", {}), ("ext", {"enable_consume_queue_ext": True})])
def test_random_damage_to_every_file_kind(tmp_path, name, config):
    cases = run_campaign(tmp_path, name, seed=1 if name == "plain" else 2, cases=400, seconds=45, **config)
    ran = [c for c in cases if "skipped" not in c]
    kinds = Counter(c["kind"] for c in ran)
    assert len(ran) >= 40 and len(kinds) >= (7 if name == "ext" else 6), kinds
    failures = report(cases)
    assert not failures, failures
