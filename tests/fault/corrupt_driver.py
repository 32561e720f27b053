"""Corrupts one file of a copy of a known store per case and runs every reader over it; run as a script:

    python corrupt_driver.py BASE ACKED_JSON WORKDIR SEED CASES SECONDS

BASE is a cleanly closed store written with workload.config() (ACKED_JSON lists its messages). For each case
(until CASES ran or SECONDS passed) it copies BASE, picks a file of one kind (CommitLog, ConsumeQueue, batch
ConsumeQueue, ConsumeQueue ext, index, checkpoint, config JSON), damages it in one way (bit flips, random
or zeroed bytes, an extreme value in an aligned field, truncation, appended garbage), sometimes leaves an
`abort` file as a crash would, then runs `rocketstore inspect`, `verify` and `dump`, a read-only open and a
writable open, each reading every queue and querying keys. One JSON line per case says what failed:
- a CLI command that exits other than 0/1, raises, or prints a traceback;
- the library raising anything but a RocketStoreError (MemoryError from an untrusted size included: the
  address space is capped at 3 GiB), or taking over 30 s (SIGALRM);
- after damage to a derived file (queues, ext, index, checkpoint) a writable open that succeeded but does not
  serve every message at its offset with its own body: the CommitLog is the source of truth.
"""

import json
import os
import random
import resource
import shutil
import signal
import sys
import time
import traceback

import workload as W

KINDS = ["commitlog", "consumequeue", "batchconsumequeue", "consumequeue_ext", "index", "checkpoint", "config"]
DERIVED = {"consumequeue", "batchconsumequeue", "consumequeue_ext", "index", "checkpoint"}


class Hang(BaseException):  # not an Exception: no handler in the code under test may swallow it
    pass


def _on_alarm(signum, frame):
    raise Hang("over 30 s")


def files_of(root: str, kind: str) -> list[str]:
    if kind == "checkpoint":
        return [os.path.join(root, "checkpoint")]
    if kind == "config":
        d = os.path.join(root, "config")
        return [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".json")]
    out = []
    for dirpath, _dirs, names in os.walk(os.path.join(root, kind)):
        out += [os.path.join(dirpath, n) for n in sorted(names)]
    return sorted(out)


def damage(path: str, rng: random.Random) -> str:
    data = bytearray(open(path, "rb").read())
    n = len(data)
    how = rng.choice(["flip", "garbage", "zero", "extreme", "truncate", "append"] if n else ["append"])
    if how == "flip":
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(n)] ^= 1 << rng.randrange(8)
    elif how in ("garbage", "zero"):
        at, length = rng.randrange(n), rng.randint(1, 64)
        data[at : at + length] = (os.urandom(length) if how == "garbage" else bytes(length))[: n - at]
    elif how == "extreme":
        width = rng.choice([2, 4, 8])
        at = rng.randrange(0, max(1, n - width + 1), width) if n >= width else 0
        value = rng.choice([0, 1, -1, 2 ** (8 * width - 1) - 1, -(2 ** (8 * width - 1))])
        data[at : at + width] = value.to_bytes(width, "big", signed=True)[: n - at]
    elif how == "truncate":
        del data[rng.randrange(n) :]
    else:
        data += os.urandom(rng.randint(1, 100))
    with open(path, "wb") as fh:
        fh.write(data)
    return how


def cli_checks(root: str, target: str) -> list[str]:
    from click.testing import CliRunner
    from rocketstore.cli.main import cli

    bad = []
    runner = CliRunner()
    cfg = ["--hash-slots", "16"] if "/index/" in target else []
    for args in (
        ["inspect", root],
        ["verify", root],
        ["dump", target, "--limit", "200", *cfg],
        ["dump", target, "--json", "--limit", "200", *cfg],
    ):
        r = runner.invoke(cli, args, catch_exceptions=True)
        if r.exception is not None and not isinstance(r.exception, SystemExit):
            bad.append(f"{args[0]}: raised {type(r.exception).__name__}: {r.exception}")
        elif r.exit_code not in (0, 1):
            bad.append(f"{args[0]}: exit status {r.exit_code}")
        elif "Traceback" in r.output:
            bad.append(f"{args[0]}: printed a traceback")
    return bad


def read_everything(store, acked: dict) -> dict:
    """(topic, queue, offset) -> body sha1 of every message get serves; queries some keys on the way."""
    from rocketstore import GetStatus

    got = {}
    for topic in (W.TOPIC, W.BATCH_TOPIC):
        for q in range(W.QUEUES):
            if store.consume_queue(topic, q) is None:
                continue
            off, end = store.min_offset(topic, q), store.max_offset(topic, q)
            while off < end:
                g = store.get("fuzz", topic, q, off, 32)
                if g.status is not GetStatus.FOUND:
                    off = max(off + 1, g.next_begin_offset)
                    continue
                msgs = g.unpacked() if topic == W.BATCH_TOPIC else g.messages
                for m in msgs:
                    if m.topic != topic:
                        raise AssertionError(f"get {topic}/{q}@{off} served a message of topic {m.topic}")
                    got[(topic, q, m.queue_offset)] = W.sha1(m.body)
                off = max(off + 1, g.next_begin_offset)
    for key in ("k0-1", "shared3", "k0-77"):
        for m in store.query(W.TOPIC, key):
            if key not in (m.keys or []):
                raise AssertionError(f"query {key} answered a message with keys {m.keys}")
    return got


def _config():
    return W.config(**json.loads(os.environ.get("FAULT_CONFIG", "{}")))


def one_case(base: str, acked: dict, work: str, rng: random.Random) -> dict:
    from rocketstore import MessageStore, Message, RocketStoreError

    root = os.path.join(work, "store")
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(base, root)
    kind = rng.choice(KINDS)
    candidates = files_of(root, kind)
    if not candidates:
        return {"kind": kind, "skipped": "no such file"}
    target = rng.choice(candidates)
    how = damage(target, rng)
    crashed = rng.random() < 0.3
    if crashed:
        with open(os.path.join(root, "abort"), "w") as fh:
            fh.write("1")
    case = {"kind": kind, "file": os.path.relpath(target, root), "how": how, "crashed": crashed, "failures": []}
    fail = case["failures"]
    fail += cli_checks(root, target)
    for read_only in (True, False):
        mode = "read-only" if read_only else "writable"
        try:
            store = MessageStore.open(root, _config(), read_only=read_only)
        except RocketStoreError as e:
            case[mode] = f"refused: {e}"[:200]
            continue
        except Exception as e:  # noqa: BLE001  anything else is what we are looking for
            fail.append(f"{mode} open raised {type(e).__name__}: {e}"[:400])
            continue
        try:
            got = read_everything(store, acked)
            if not read_only:
                r = store.put(Message(W.TOPIC, b"after-damage"), queue_id=0)
                if not r.ok:
                    fail.append(f"put after open answered {r.status}")
            case[mode] = "opened"
            if not read_only and kind in DERIVED:
                lost = [k for k, h in acked.items() if got.get(k) != h]
                if lost:
                    fail.append(f"{len(lost)} messages not served after damage to a derived file, e.g. {lost[:3]}")
        except RocketStoreError as e:
            case[mode] = f"read refused: {e}"[:200]
        except Exception as e:  # noqa: BLE001
            fail.append(f"{mode} read raised {type(e).__name__}: {e} {traceback.format_exc(limit=-3)}"[:800])
        finally:
            try:
                store.close()
            except RocketStoreError:
                pass
            except Exception as e:  # noqa: BLE001
                fail.append(f"{mode} close raised {type(e).__name__}: {e}"[:400])
    return case


def main() -> None:
    base, acked_json, work, seed, cases, seconds = sys.argv[1:7]
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    signal.signal(signal.SIGALRM, _on_alarm)
    with open(acked_json) as fh:
        acked = {(t, q, o): h for t, q, o, h in json.load(fh)}
    rng = random.Random(int(seed))
    t_end = time.monotonic() + float(seconds)
    for i in range(int(cases)):
        if time.monotonic() > t_end:
            break
        signal.alarm(30)
        try:
            case = one_case(base, acked, work, rng)
        except Hang:
            case = {"failures": ["hang: over 30 s"]}
        except Exception as e:  # noqa: BLE001
            case = {"failures": [f"driver: {type(e).__name__}: {e} {traceback.format_exc(limit=-3)}"[:800]]}
        signal.alarm(0)
        case["case"] = i
        print(json.dumps(case), flush=True)


if __name__ == "__main__":
    main()
