"""The console's pages over HTTP against a store with known contents (conftest.make_store): `rocketstore console`
read-only, and `rocketstore serve`'s HTTP side where the forms change the store. What each page must show is what
the test put into the store; bad input gets a sentence saying what is wrong."""

import html
import re
import subprocess
import sys
import threading
import time

import pytest
from console_harness import BINARY, COMMITTED, ORDERS, ServeHttp, free_port, http_get, http_post, make_store


class ConsoleProcess:
    """`rocketstore console STORE --http ...` in a subprocess."""

    def __init__(self, store):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "rocketstore.cli", "console", str(store), "--http", f"127.0.0.1:{self.port}",
               "--refresh", "1"]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.before: list[str] = []  # what came before the ready line (a damaged store's recovery log)
        for line in self.proc.stdout:
            if line.startswith("rocketstore console: store"):
                break
            self.before.append(line)
        else:
            raise AssertionError("the console did not start: " + "".join(self.before))
        self.rest: list[str] = []
        threading.Thread(target=lambda: self.rest.extend(self.proc.stdout), daemon=True).start()

    def get(self, path):
        return http_get(self.base + path)

    def stop(self):
        self.proc.terminate()
        return self.proc.wait(30)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("console") / "store"
    return root, make_store(root)


@pytest.fixture(scope="module")
def console(made):
    c = ConsoleProcess(made[0])
    yield c
    assert c.stop() == 0


def text(page: str) -> str:
    """The page's text, tags dropped and entities decoded, white space collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_every_page_loads_and_names_the_store(console, made):
    root, _ = made
    for path in ("/", "/topics", "/groups", "/messages", "/health", "/topic?name=Orders", "/group?name=g1"):
        status, page = console.get(path)
        assert status == 200, (path, page)
    status, page = console.get("/")
    assert str(root) in text(page) and "read-only" in text(page)
    assert re.search(r'id="topic-count">4<', page)  # Orders, Binary, %RETRY%g1, %DLQ%g1
    assert re.search(r'id="group-count">1<', page)


def test_topics_show_queues_and_counts(console):
    _, page = console.get("/topics")
    row = re.search(r'<tr data-topic="Orders">.*?</tr>', page, re.S).group(0)
    assert f'class="messages">{ORDERS}<' in row
    _, page = console.get("/topic?name=Orders")
    rows = re.findall(r"<tr><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td>", page)
    assert [tuple(map(int, r)) for r in rows] == [(q, 0, ORDERS // 4, ORDERS // 4) for q in range(4)]
    assert "g1" in text(page) and str(ORDERS - 4 * COMMITTED) in text(page)


def test_groups_show_the_lag_per_group_and_queue(console):
    _, page = console.get("/groups")
    assert re.search(r'data-group="g1">.*?class="lag">' + str(ORDERS - 4 * COMMITTED) + "<", page, re.S)
    _, page = console.get("/group?name=g1")
    lags = re.findall(r'class="committed">(\d+)</td><td class="lag">(\d+)<', page)
    assert lags == [(str(COMMITTED), str(ORDERS // 4 - COMMITTED))] * 4


def test_search_by_key_and_the_detail(console, made):
    _, contents = made
    want = contents["orders"][3]
    _, page = console.get("/messages?by=key&topic=Orders&key=order-3")
    links = re.findall(r'href="/message\?offset=(\d+)"', page)
    assert links == [str(want["phys"])]
    _, page = console.get(f"/message?offset={want['phys']}")
    t = text(page)
    assert f"Message {want['msg_id']}" in t
    assert "order body 3" in t and "color red" in t and "order-3" in t and want["uniq"] in t
    assert f"queue / queue offset {want['queue']} / {want['offset']}" in t
    assert "commitlog/00000000000000000000" in t


@pytest.mark.parametrize("which", ["msg_id", "uniq"])
def test_search_by_either_id(console, made, which):
    _, contents = made
    want = contents["orders"][5]
    _, page = console.get(f"/messages?by=id&msg_id={want[which]}")
    assert re.findall(r'href="/message\?offset=(\d+)"', page) == [str(want["phys"])]


def test_search_by_queue_offset_and_by_time(console, made):
    _, contents = made
    want = [o for o in contents["orders"] if o["queue"] == 2 and o["offset"] == 3][0]
    _, page = console.get("/messages?by=offset&topic=Orders&queue=2&offset=3")
    assert re.findall(r'href="/message\?offset=(\d+)"', page) == [str(want["phys"])]
    _, page = console.get("/messages?by=time&topic=Orders&begin=0&end=9223372036854775807")
    found = re.findall(r'href="/message\?offset=(\d+)"', page)
    assert sorted(map(int, found)) == sorted(o["phys"] for o in contents["orders"])


def test_binary_body_as_hex_and_base64(console, made):
    _, contents = made
    phys = contents["binary"]["phys"]
    _, page = console.get(f"/message?offset={phys}&view=hex")
    assert "00 01 02 03" in page and "fe ff" in page
    _, page = console.get(f"/message?offset={phys}&view=base64")
    import base64

    assert base64.b64encode(BINARY).decode() in page
    _, page = console.get(f"/message?offset={phys}")
    assert "not UTF-8 text" in page


def test_the_trace_shows_consumption_retries_and_the_dlq(console, made):
    _, contents = made
    first = contents["orders"][0]
    _, page = console.get(f"/message?offset={first['phys']}")
    whats = re.findall(r'class="what">([^<]+)<', page)
    assert whats == ["consumed", "retried (attempt 1)", "reached the dead-letter queue"]


@pytest.mark.parametrize(
    "path, message",
    [
        ("/messages?by=offset&topic=Orders&queue=x&offset=1", "queue must be a whole number, not 'x'"),
        ("/messages?by=offset&topic=Orders&queue=9&offset=1", "topic Orders has no queue 9"),
        ("/messages?by=offset&topic=Orders&queue=0&offset=99", "queue 0 of Orders holds offsets 0 to 4, not 99"),
        ("/messages?by=key&topic=Nope&key=k", "no topic Nope in this store"),
        ("/messages?by=key&topic=bad%20name&key=k", "contains illegal characters"),
        ("/messages?by=id&msg_id=xyz", "'xyz' is no message id"),
        ("/messages?by=time&topic=Orders&begin=yesterday&end=1", "begin: 'yesterday' is neither milliseconds"),
        ("/messages?by=time&topic=Orders&begin=5&end=1", "the end is before the begin"),
        ("/message?offset=-1", "offset must be between 0 and"),
        ("/message?offset=1", "no message starts at physical offset 1"),
        ("/group?name=bad%20group", "contains illegal characters"),
        ("/topic?name=Missing", "no topic Missing in this store"),
        ("/health?verify=1&part=disks", "part must be one of all, commitlog, consumequeue, index"),
    ],
)
def test_bad_input_is_a_clear_message(console, path, message):
    status, page = console.get(path)
    assert status == 400
    assert message in html.unescape(page)


def test_the_health_page_runs_verify(console):
    _, page = console.get("/health?verify=1&part=all&limit=10")
    t = text(page)
    assert "no problem in all" in t and "native" in t or "pure Python" in t
    assert "records" in t


def test_read_only_console_refuses_changes(console, made):
    status, page = http_post(console.base + "/topics/create", {"name": "NewTopic"})
    assert status == 400 and "open read-only" in html.unescape(page)
    status, page = http_post(console.base + "/groups/reset", {"group": "g1", "topic": "Orders", "to": "earliest"})
    assert status == 400 and "open read-only" in html.unescape(page)


def test_serve_forms_change_the_store_as_mqadmin_would(tmp_path):
    contents = make_store(tmp_path / "store")
    s = ServeHttp(tmp_path).start("--no-grpc", "--no-namesrv")
    try:
        hx = {"HX-Request": "true"}
        assert s.post("/topics/create", {"name": "NewTopic", "queues": "3"}, headers=hx)[0] == 200
        _, page = s.get("/topic?name=NewTopic")
        assert len(re.findall(r"<tr><td>\d+</td><td>0</td>", page)) == 3
        for form, message in [
            ({"name": "NewTopic"}, "topic NewTopic already exists"),
            ({"name": "bad name!"}, "contains illegal characters"),
            ({"name": "TBW102"}, "The topic[TBW102] is conflict with system topic."),
            ({"name": "T2", "queues": "0"}, "queues must be between 1 and 1024, not 0"),
            ({"name": "T2", "queues": "many"}, "queues must be a whole number"),
            ({"name": "T2", "message_type": "URGENT"}, "message type must be one of"),
        ]:
            status, page = s.post("/topics/create", form, headers=hx)
            assert (status, message in html.unescape(page)) == (400, True), (form, page)
        assert s.post("/topics/update", {"name": "NewTopic", "queues": "5"}, headers=hx)[0] == 200
        _, page = s.get("/topic?name=NewTopic")
        assert "5 write / 5 read queues" in page
        status, page = s.post("/topics/delete", {"name": "NewTopic", "confirm": "nope"}, headers=hx)
        assert status == 400 and "type the topic's name (NewTopic)" in html.unescape(page)
        assert s.post("/topics/delete", {"name": "NewTopic", "confirm": "NewTopic"}, headers=hx)[0] == 200
        assert s.get("/topic?name=NewTopic")[0] == 400
        # reset g1 on Orders to the earliest: the whole topic is its lag again
        assert s.post("/groups/reset", {"group": "g1", "topic": "Orders", "to": "earliest"})[0] == 200
        _, page = s.get("/group?name=g1")
        assert re.search(r'id="group-lag">' + str(ORDERS) + "<", page)
        # then to the latest: its consumption (committed offsets' growth) shows as a rate once sampled
        assert s.post("/groups/reset", {"group": "g1", "topic": "Orders", "to": "latest"})[0] == 200
        _, page = s.get("/group?name=g1")
        assert re.search(r'id="group-lag">0<', page)
        deadline = time.monotonic() + 60
        while not re.search(
            r'data-group="g1">.*?class="rate">([1-9][0-9.]*|0\.[0-9]*[1-9])<', s.get("/groups")[1], re.S
        ):
            assert time.monotonic() < deadline, "no consumption rate shown for g1"
            time.sleep(0.2)
        status, page = s.post("/groups/reset", {"group": "g1", "topic": "Orders", "to": "offset", "value": "x"})
        assert status == 400 and "offset must be a whole number" in html.unescape(page)
        # resend the dead-letter message to Orders: one more message there, its body and key
        status, page = s.post("/message/resend", {"offset": str(contents["dlq_phys"])}, headers=hx)
        assert status == 200, page
        _, page = s.get("/topics")
        row = re.search(r'<tr data-topic="Orders">.*?</tr>', page, re.S).group(0)
        assert f'class="messages">{ORDERS + 1}<' in row
        _, page = s.get("/messages?by=key&topic=Orders&key=order-0")
        assert len(re.findall(r'href="/message\?offset=\d+"', page)) == 2
        status, page = s.post("/message/resend", {"offset": str(contents["orders"][1]["phys"])}, headers=hx)
        assert status == 400 and "not in a dead-letter queue" in html.unescape(page)
        status, _ = s.post("/topics/create", {"name": "X"}, headers={"Origin": "http://elsewhere.example"})
        assert status == 403
    finally:
        assert s.stop() == 0, "".join(s.lines)


def test_verify_findings_within_a_range_of_offsets(tmp_path):
    """One record's body damaged on disk: verify finds it at its physical offset, inside a range that holds it
    and not in one that does not."""
    contents = make_store(tmp_path / "store")
    bad = contents["orders"][10]["phys"]
    segment = tmp_path / "store" / "commitlog" / "00000000000000000000"
    data = bytearray(segment.read_bytes())
    at = data.index(b"order body 10", bad)
    data[at] ^= 0xFF
    segment.write_bytes(bytes(data))
    c = ConsoleProcess(tmp_path / "store")
    try:
        _, page = c.get(f"/health?verify=1&part=commitlog&from={bad}&to={bad + 1}")
        t = text(page)
        assert f"1 problem(s) in commitlog, CommitLog offsets {bad} to {bad + 1}" in t
        assert re.findall(r"<tr><td>(commitlog/[0-9]+)</td><td>(\d+)</td>", page) == [
            ("commitlog/00000000000000000000", str(bad))
        ]
        _, page = c.get(f"/health?verify=1&part=all&from=0&to={bad}")
        assert f"no problem in all, CommitLog offsets 0 to {bad}" in text(page)
        status, page = c.get("/health?verify=1&part=all&from=9&to=3")
        assert status == 400 and "the range's end (3) must be past its start (9)" in html.unescape(page)
    finally:
        assert c.stop() == 0
