"""The clients of `rocketstore serve`'s remoting broker that tests/fault/test_broker_kills.py runs while it kills
the server, and the configuration they share.

Run as a script (`python broker_workload.py PORT SEED MODE`), it connects to the broker on 127.0.0.1:PORT and runs
RocketMQ's remoting clients side by side, each on its own connection, until it is killed, printing one line per
acknowledged operation (flushed at once: a line the parent reads was acknowledged before the kill). Times are
time.monotonic() (CLOCK_MONOTONIC, one clock for every process of the machine) and, for wall-clock comparisons
with store times, time.time() in ms.

  ack TOPIC QUEUE OFFSET SHA1          a send (SEND_MESSAGE, SEND_MESSAGE_V2) or a batch's message
                                       (SEND_BATCH_MESSAGE) answered SUCCESS at that queue offset
  delay KEY LEVEL                      a DELAY-level send answered SUCCESS (the message waits in SCHEDULE_TOPIC_XXXX)
  half KEY                             a prepared (transactional) send answered SUCCESS; KEY ends in its intent:
                                       C commit, R rollback, P left pending for the check-back
  end KEY C|R                          END_TRANSACTION answered SUCCESS
  checked KEY C|R                      CHECK_TRANSACTION_STATE received and answered (END_TRANSACTION oneway,
                                       fromTransactionCheck): C/R keys get their intent, P keys by their number
  restored GROUP QUEUE OFFSET          QUERY_CONSUMER_OFFSET at the start (-1: none)
  got GROUP QUEUE OFFSET SHA1          a pulled message
  want GROUP QUEUE OFFSET              a commit about to be sent
  commit GROUP QUEUE OFFSET T          the commit answered (UPDATE_CONSUMER_OFFSET SUCCESS, or the pull that carried
                                       it with FLAG_COMMIT_OFFSET answered), T its monotonic time

  ready                                every client connected (a consumer: its restored offsets reported)
  disconnected                         a client's connection closed (the server was killed); it waits for its own kill

MODE `work` runs every client; `drain` only answers transaction checks and reports the restored offsets."""

import asyncio
import hashlib
import itertools
import json
import random
import sys
import time

SEND_TOPIC = "KSend"  # sync sends and batches; both consumer groups read it
DELAY_TOPIC = "KDelay"
TX_TOPIC = "KTx"
QUEUES = 4
PULL_GROUP = "kpull"  # a pull consumer: pulls, then UPDATE_CONSUMER_OFFSET
PUSH_GROUP = "kpush"  # pulls as a push consumer does: long polling, the consumed offset carried by the next pull
GROUPS = (PULL_GROUP, PUSH_GROUP)
PRODUCER_GROUP = "ktxp"
DELAY_LEVELS_S = (1, 2, 3)  # messageDelayLevel below
FLUSH_OFFSETS_MS = 1000  # flushConsumerOffsetInterval below

BROKER_CONF = f"""brokerName=fault-broker
mappedFileSizeCommitLog=1048576
mappedFileSizeConsumeQueue=6000
flushConsumerOffsetInterval={FLUSH_OFFSETS_MS}
transactionTimeOut=1000
transactionCheckInterval=1000
messageDelayLevel={" ".join(f"{s}s" for s in DELAY_LEVELS_S)}
"""

PREPARED, COMMIT, ROLLBACK = 4, 8, 12  # MessageSysFlag transaction types
FLAG_COMMIT_OFFSET, FLAG_SUSPEND, FLAG_SUBSCRIPTION = 0x1, 0x2, 0x4


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def body(tag: str, rng: random.Random) -> bytes:
    """A body that names its message (so any two differ), 0..2,000 bytes of filler."""
    return tag.encode() + b"|" + bytes(rng.choice(b"abcdefghij") for _ in range(rng.randint(0, 2000)))


def check_decision(key: str) -> str:
    """What the producer answers a check of `key` with: its intent, a pending one by its number's parity."""
    intent = key.rsplit("-", 1)[1]
    if intent in "CR":
        return intent
    return "C" if int(key.split("-")[2]) % 2 == 0 else "R"


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Conn:
    """One remoting connection: a reader task files responses by opaque; requests from the broker go to
    `on_request` (a coroutine function)."""

    def __init__(self, reader, writer, on_request=None):
        from rocketstore.remoting import frame

        self.frame = frame
        self.reader, self.writer = reader, writer
        self.opaques = itertools.count(1)
        self.waiting: dict[int, asyncio.Future] = {}
        self.on_request = on_request
        self.task = asyncio.ensure_future(self._read())

    @classmethod
    async def connect(cls, port: int, on_request=None) -> "Conn":
        return cls(*await asyncio.open_connection("127.0.0.1", port), on_request)

    async def _read(self):
        try:
            while True:
                length = self.frame.frame_length(await self.reader.readexactly(4))
                cmd = self.frame.decode(await self.reader.readexactly(length))
                if cmd.is_response:
                    fut = self.waiting.pop(cmd.opaque, None)
                    if fut is not None and not fut.done():
                        fut.set_result(cmd)
                elif self.on_request is not None:
                    await self.on_request(self, cmd)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            for fut in self.waiting.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("connection closed"))

    async def send(self, code: int, ext: dict | None, body: bytes = b"", oneway: bool = False) -> int:
        from rocketstore.remoting.command import ONEWAY_FLAG, RemotingCommand

        cmd = RemotingCommand(code=code, ext_fields=ext, body=body, opaque=next(self.opaques))
        if oneway:
            cmd.flag |= ONEWAY_FLAG
        else:
            self.waiting[cmd.opaque] = asyncio.get_running_loop().create_future()
        self.writer.write(self.frame.encode(cmd))
        await self.writer.drain()
        return cmd.opaque

    async def call(self, code: int, ext: dict | None, body: bytes = b"", timeout: float = 10):
        opaque = await self.send(code, ext, body)
        return await asyncio.wait_for(self.waiting[opaque], timeout)

    async def heartbeat(self, client_id: str, producer: str | None = None, consumer: str | None = None):
        from rocketstore.remoting.codes import RequestCode as RC

        consumers = []
        if consumer:
            sub = {"topic": SEND_TOPIC, "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 0}
            consumers.append({"groupName": consumer, "consumeType": "CONSUME_PASSIVELY",
                              "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                              "subscriptionDataSet": [sub], "unitMode": False})  # fmt: skip
        data = {"clientID": client_id, "producerDataSet": [{"groupName": producer}] if producer else [],
                "consumerDataSet": consumers}  # fmt: skip
        return await self.call(RC.HEART_BEAT, None, json.dumps(data).encode())


def send_ext(topic: str, queue_id: int, props: str, sys_flag: int = 0, group: str = "kpg") -> dict:
    """SendMessageRequestHeader as DefaultMQProducerImpl.sendKernelImpl fills it."""
    return {"producerGroup": group, "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": str(QUEUES),
            "queueId": str(queue_id), "sysFlag": str(sys_flag), "bornTimestamp": str(int(time.time() * 1000)),
            "flag": "0", "properties": props, "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}  # fmt: skip


V2_SHORT = {"producerGroup": "a", "topic": "b", "defaultTopic": "c", "defaultTopicQueueNums": "d", "queueId": "e",
            "sysFlag": "f", "bornTimestamp": "g", "flag": "h", "properties": "i", "reconsumeTimes": "j",
            "unitMode": "k", "batch": "m"}  # fmt: skip


def v2(ext: dict) -> dict:
    return {V2_SHORT[k]: v for k, v in ext.items()}


async def producer(port: int, seed: int, rng: random.Random) -> None:
    """Sync sends (SEND_MESSAGE and SEND_MESSAGE_V2) and batches (SEND_BATCH_MESSAGE) to SEND_TOPIC."""
    from rocketstore.formats.inner_batch import encode_messages
    from rocketstore.remoting.codes import RequestCode as RC

    conn = await Conn.connect(port)
    started()
    for n in itertools.count():
        q = rng.randrange(QUEUES)
        if rng.random() < 0.3:
            bodies = [body(f"s{seed}-{n}-{i}", rng) for i in range(rng.randint(2, 8))]
            msgs = [(b, f"TAGS\x01B\x02UNIQ_KEY\x01s{seed}-{n}-{i}\x02", 0) for i, b in enumerate(bodies)]
            r = await conn.call(RC.SEND_BATCH_MESSAGE, v2(send_ext(SEND_TOPIC, q, "")), encode_messages(msgs))
        else:
            bodies = [body(f"s{seed}-{n}", rng)]
            ext = send_ext(SEND_TOPIC, q, f"TAGS\x01A\x02KEYS\x01s{seed}-{n}\x02UNIQ_KEY\x01s{seed}-{n}\x02")
            code = RC.SEND_MESSAGE if n % 2 else RC.SEND_MESSAGE_V2
            r = await conn.call(code, v2(ext) if code == RC.SEND_MESSAGE_V2 else ext, bodies[0])
        if r.code == 0:
            base, qid = int(r.ext_fields["queueOffset"]), int(r.ext_fields["queueId"])
            for i, b in enumerate(bodies):
                _say(f"ack {SEND_TOPIC} {qid} {base + i} {sha1(b)}")
        else:
            await asyncio.sleep(0.05)


async def delayed(port: int, seed: int, rng: random.Random) -> None:
    """Sends with a DELAY level to DELAY_TOPIC."""
    from rocketstore.remoting.codes import RequestCode as RC

    conn = await Conn.connect(port)
    started()
    for n in itertools.count():
        key, level = f"d{seed}-{n}", rng.randint(1, len(DELAY_LEVELS_S))
        props = f"DELAY\x01{level}\x02KEYS\x01{key}\x02UNIQ_KEY\x01{key}\x02"
        r = await conn.call(RC.SEND_MESSAGE, send_ext(DELAY_TOPIC, rng.randrange(QUEUES), props), body(key, rng))
        if r.code == 0:
            _say(f"delay {key} {level}")
        await asyncio.sleep(rng.uniform(0, 0.03))


async def answer_check(conn: Conn, cmd) -> None:
    """ClientRemotingProcessor.checkTransactionState: END_TRANSACTION oneway, fromTransactionCheck."""
    from rocketstore.remoting.codes import RequestCode as RC

    if cmd.code != RC.CHECK_TRANSACTION_STATE:
        return
    e = cmd.ext_fields or {}
    key = e.get("transactionId") or e.get("msgId") or ""
    if not key.startswith("t"):
        return
    decision = check_decision(key)
    ext = {"producerGroup": PRODUCER_GROUP, "tranStateTableOffset": e["tranStateTableOffset"],
           "commitLogOffset": e["commitLogOffset"], "commitOrRollback": str(COMMIT if decision == "C" else ROLLBACK),
           "fromTransactionCheck": "true", "msgId": key, "transactionId": key}  # fmt: skip
    await conn.send(RC.END_TRANSACTION, ext, oneway=True)
    _say(f"checked {key} {decision}")


async def transactions(port: int, seed: int, rng: random.Random, work: bool = True) -> None:
    """A transaction producer: half messages, most ended with END_TRANSACTION (commit or rollback), some left
    for the check-back, which this connection answers (it registered as a producer of the group)."""
    from rocketstore.formats.record import parse_msg_id
    from rocketstore.remoting.codes import RequestCode as RC

    conn = await Conn.connect(port, on_request=answer_check)
    r = await conn.heartbeat(f"127.0.0.1@tx{seed}", producer=PRODUCER_GROUP)
    assert r.code == 0, r.remark
    started()
    if not work:
        await asyncio.Event().wait()
    for n in itertools.count():
        intent = rng.choice("CCCRRP")
        key = f"t-{seed}-{n}-{intent}"
        props = f"TRAN_MSG\x01true\x02PGROUP\x01{PRODUCER_GROUP}\x02KEYS\x01{key}\x02UNIQ_KEY\x01{key}\x02"
        ext = send_ext(TX_TOPIC, rng.randrange(QUEUES), props, sys_flag=PREPARED, group=PRODUCER_GROUP)
        r = await conn.call(RC.SEND_MESSAGE, ext, body(key, rng))
        if r.code != 0:
            await asyncio.sleep(0.05)
            continue
        _say(f"half {key}")
        if intent == "P":
            continue
        await asyncio.sleep(rng.uniform(0, 0.02))
        end = {"producerGroup": PRODUCER_GROUP, "tranStateTableOffset": r.ext_fields["queueOffset"],
               "commitLogOffset": str(parse_msg_id(r.ext_fields["msgId"])[1]),
               "commitOrRollback": str(COMMIT if intent == "C" else ROLLBACK), "fromTransactionCheck": "false",
               "msgId": key, "transactionId": key}  # fmt: skip
        r = await conn.call(RC.END_TRANSACTION, end)
        if r.code == 0:
            _say(f"end {key} {intent}")


STARTED: list[asyncio.Future] = []  # one per client, done once it is connected (and a consumer's offsets reported)


def started() -> None:
    for fut in STARTED:
        if not fut.done():
            fut.set_result(None)
            return


async def restored(conn: Conn, group: str) -> dict[int, int]:
    from rocketstore.remoting.codes import RequestCode as RC

    out = {}
    for q in range(QUEUES):
        ext = {"consumerGroup": group, "topic": SEND_TOPIC, "queueId": str(q), "setZeroIfNotFound": "false"}
        r = await conn.call(RC.QUERY_CONSUMER_OFFSET, ext)
        out[q] = int(r.ext_fields["offset"]) if r.code == 0 else -1
        _say(f"restored {group} {q} {out[q]}")
    return out


def pull_ext(group: str, q: int, offset: int, sys_flag: int, commit: int = 0, suspend_ms: int = 0) -> dict:
    return {"consumerGroup": group, "topic": SEND_TOPIC, "queueId": str(q), "queueOffset": str(offset),
            "maxMsgNums": "16", "sysFlag": str(sys_flag), "commitOffset": str(commit),
            "suspendTimeoutMillis": str(suspend_ms), "subscription": "*", "subVersion": "0",
            "expressionType": "TAG"}  # fmt: skip


def report_pulled(group: str, q: int, r) -> int:
    """The messages of a FOUND pull, reported; the offset to go on from."""
    from rocketstore.formats.record import decode_record_py

    pos = 0
    while pos < len(r.body or b""):
        m = decode_record_py(r.body, pos)
        _say(f"got {group} {q} {m.queue_offset} {sha1(m.body or b'')}")
        pos += m.size
    return int(r.ext_fields["nextBeginOffset"])


async def pull_consumer(port: int, seed: int, rng: random.Random) -> None:
    """Pulls each queue in turn (no long polling) and commits what it consumed with UPDATE_CONSUMER_OFFSET."""
    from rocketstore.remoting.codes import RequestCode as RC

    conn = await Conn.connect(port)
    await conn.heartbeat(f"127.0.0.1@pull{seed}", consumer=PULL_GROUP)
    offsets = {q: max(o, 0) for q, o in (await restored(conn, PULL_GROUP)).items()}
    started()
    while True:
        for q in range(QUEUES):
            r = await conn.call(RC.PULL_MESSAGE, pull_ext(PULL_GROUP, q, offsets[q], FLAG_SUBSCRIPTION))
            if r.code != 0:
                continue
            nxt = report_pulled(PULL_GROUP, q, r)
            _say(f"want {PULL_GROUP} {q} {nxt}")
            ext = {"consumerGroup": PULL_GROUP, "topic": SEND_TOPIC, "queueId": str(q), "commitOffset": str(nxt)}
            c = await conn.call(RC.UPDATE_CONSUMER_OFFSET, ext)
            if c.code == 0:
                _say(f"commit {PULL_GROUP} {q} {nxt} {time.monotonic():.4f}")
            offsets[q] = nxt
        await asyncio.sleep(rng.uniform(0, 0.05))


async def push_consumer(port: int, seed: int, rng: random.Random) -> None:
    """A push consumer's pulls: one pull request per queue, long polling (FLAG_SUSPEND, 1 s), each carrying the
    offset consumed so far (FLAG_COMMIT_OFFSET: the broker commits it before it looks), as
    DefaultMQPushConsumerImpl.pullMessage sends them."""
    from rocketstore.remoting.codes import RequestCode as RC

    conn = await Conn.connect(port)
    await conn.heartbeat(f"127.0.0.1@push{seed}", consumer=PUSH_GROUP)
    start = await restored(conn, PUSH_GROUP)
    started()

    async def one_queue(q: int) -> None:
        consumed = max(start[q], 0)
        while True:
            flags = FLAG_SUBSCRIPTION | FLAG_SUSPEND | FLAG_COMMIT_OFFSET
            _say(f"want {PUSH_GROUP} {q} {consumed}")
            r = await conn.call(RC.PULL_MESSAGE, pull_ext(PUSH_GROUP, q, consumed, flags, consumed, 1000), timeout=20)
            if r.code in (0, 19, 20, 21):  # FOUND, NOT_FOUND, RETRY_IMMEDIATELY, OFFSET_MOVED: the commit went in
                _say(f"commit {PUSH_GROUP} {q} {consumed} {time.monotonic():.4f}")
            if r.code == 0:
                consumed = report_pulled(PUSH_GROUP, q, r)
            elif r.code == 17:  # the topic is not there yet
                await asyncio.sleep(0.1)

    await asyncio.gather(*(one_queue(q) for q in range(QUEUES)))


async def until_killed(client) -> None:
    """Runs a client; when the server goes away (its connection closed) waits for the kill that follows. Any
    other failure ends the process with a traceback (the parent then sees it exit by itself)."""
    try:
        await client
    except (ConnectionError, asyncio.IncompleteReadError):
        _say("disconnected")
        await asyncio.Event().wait()


async def main() -> None:
    port, seed, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    if mode == "drain":
        conn = await Conn.connect(port)
        for g in GROUPS:
            await restored(conn, g)
        STARTED.append(loop.create_future())
        task = asyncio.ensure_future(until_killed(transactions(port, seed, rng, work=False)))
        await asyncio.wait([STARTED[0], task], return_when=asyncio.FIRST_COMPLETED)
        _say("ready")
        await task
        return
    clients = (producer, delayed, transactions, pull_consumer, push_consumer)
    STARTED.extend(loop.create_future() for _ in clients)
    # the producer goes first so the topic exists before the consumers pull it
    tasks = [asyncio.ensure_future(until_killed(producer(port, seed, random.Random(rng.random()))))]
    await asyncio.sleep(0.2)
    tasks += [asyncio.ensure_future(until_killed(f(port, seed, random.Random(rng.random())))) for f in clients[1:]]
    all_started = asyncio.gather(*STARTED)
    done, _ = await asyncio.wait([all_started, *tasks], return_when=asyncio.FIRST_COMPLETED)
    if all_started in done:
        _say("ready")  # every client connected, the consumers' restored offsets reported
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    for t in done:  # a client failed while the server was up: the parent sees it on stderr
        t.result()


if __name__ == "__main__":
    asyncio.run(main())
