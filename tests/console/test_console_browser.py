"""The console in a real browser: headless Chromium (Debian's chromium and chromium-driver) driven by selenium,
against `rocketstore serve` over a store with known contents (conftest.make_store). Each page is loaded and
checked for what the test put into the store; a message is found by key and by id and its detail read; the live
chart is watched while the test sends; a group's offset is reset through the form and its lag read back.
Screenshots go to the test's temporary directory and, when ROCKETSTORE_ARTIFACTS names a directory, are copied
there. Skipped, saying why, where Chromium or selenium is missing (.ci/run installs both)."""

import asyncio
import os
import shutil
import threading

import pytest
from console_harness import COMMITTED, ORDERS, ServeHttp, make_store

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (requirements-test.txt)")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
    pytest.skip(
        f"headless Chromium is missing ({CHROMIUM}, {CHROMEDRIVER}): apt-get install chromium chromium-driver",
        allow_module_level=True,
    )

WAIT_S = 60  # the longest a page or the chart is waited for (a busy machine), never a measured time


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    contents = make_store(tmp / "store")
    s = ServeHttp(tmp).start("--no-grpc", "--no-namesrv")
    yield s, contents
    assert s.stop() == 0, "".join(s.lines)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    profile = tmp_path_factory.mktemp("chromium-profile")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                f"--user-data-dir={profile}", "--window-size=1280,1000"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT_S)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    """screenshot(driver, name): a PNG of the whole page in the test's directory, and in $ROCKETSTORE_ARTIFACTS."""
    where = tmp_path_factory.mktemp("screenshots")
    artifacts = os.environ.get("ROCKETSTORE_ARTIFACTS")

    def take(driver, name):
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1280, max(700, min(int(height) + 40, 2400)))
        path = where / f"console-{name}.png"
        assert driver.save_screenshot(str(path))
        driver.set_window_size(1280, 1000)
        if artifacts:
            os.makedirs(artifacts, exist_ok=True)
            shutil.copy(path, artifacts)
        return path

    return take


def wait(driver, probe):
    return WebDriverWait(driver, WAIT_S, poll_frequency=0.2).until(lambda d: probe(d))


def text_of(driver, element_id):
    return driver.find_element(By.ID, element_id).text


def test_each_page_loads_and_shows_the_store(served, browser, shots):
    s, _ = served
    pages = [
        ("overview", "/", "Overview"), ("topics", "/topics", "Topics"), ("topic", "/topic?name=Orders", "Topic Orders"),
        ("groups", "/groups", "Consumer groups"), ("group", "/group?name=g1", "Group g1"),
        ("health", "/health?verify=1&part=all", "Health"),
    ]  # fmt: skip
    for name, path, title in pages:
        browser.get(s.base + path)
        assert browser.find_element(By.TAG_NAME, "h1").text == title
        shots(browser, name)
    browser.get(s.base + "/topics")
    row = browser.find_element(By.CSS_SELECTOR, 'tr[data-topic="Orders"] td.messages')
    assert row.text == str(ORDERS)
    browser.get(s.base + "/group?name=g1")
    assert text_of(browser, "group-lag") == str(ORDERS - 4 * COMMITTED)
    browser.get(s.base + "/health?verify=1&part=all")
    assert text_of(browser, "verify-result").startswith("no problem in all")


def test_a_message_found_by_key_and_its_detail(served, browser, shots):
    s, contents = served
    want = contents["orders"][7]
    browser.get(s.base + "/messages")
    form = browser.find_element(By.ID, "search-key")
    form.find_element(By.NAME, "topic").send_keys("Orders")
    form.find_element(By.NAME, "key").send_keys("order-7")
    form.find_element(By.TAG_NAME, "button").click()
    links = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#results a.msg-link"))
    assert [a.text for a in links] == [want["msg_id"]]
    shots(browser, "messages")
    links[0].click()
    wait(browser, lambda d: d.find_elements(By.ID, "msg-id"))
    assert text_of(browser, "msg-id") == want["msg_id"]
    assert text_of(browser, "f-topic") == "Orders"
    assert text_of(browser, "f-keys") == "order-7"
    assert text_of(browser, "f-uniq") == want["uniq"]
    assert text_of(browser, "f-queue") == f"{want['queue']} / {want['offset']}"
    assert text_of(browser, "body") == "order body 7"
    props = {r.find_element(By.TAG_NAME, "th").text: r.find_element(By.TAG_NAME, "td").text
             for r in browser.find_elements(By.CSS_SELECTOR, "#properties tr")}  # fmt: skip
    assert props["color"] == "red" and props["KEYS"] == "order-7" and props["TAGS"] == "TagB"
    browser.find_element(By.ID, "view-hex").click()
    wait(browser, lambda d: d.find_element(By.ID, "body").text.startswith("6f 72 64"))  # "ord"


def test_a_message_found_by_either_id_with_its_trace(served, browser, shots):
    s, contents = served
    first = contents["orders"][0]
    # the client's id finds the message and its copies in %RETRY%g1 and %DLQ%g1 (the same UNIQ_KEY), in the
    # order they were stored; the offset msgId names the one record
    for msg_id, topics in ((first["uniq"], ["Orders", "%RETRY%g1", "%DLQ%g1"]), (first["msg_id"], ["Orders"])):
        browser.get(s.base + "/messages")
        form = browser.find_element(By.ID, "search-id")
        form.find_element(By.NAME, "msg_id").send_keys(msg_id)
        form.find_element(By.TAG_NAME, "button").click()
        rows = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#results tbody tr"))
        assert [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows] == topics
        links = browser.find_elements(By.CSS_SELECTOR, "#results a.msg-link")
        assert links[0].text == first["msg_id"]
    links[0].click()
    wait(browser, lambda d: d.find_elements(By.ID, "trace"))
    whats = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#trace td.what")]
    assert whats == ["consumed", "retried (attempt 1)", "reached the dead-letter queue"]
    shots(browser, "message")


def test_bad_input_shows_a_message(served, browser):
    s, _ = served
    browser.get(s.base + "/messages")
    form = browser.find_element(By.ID, "search-offset")
    form.find_element(By.NAME, "topic").send_keys("Orders")
    form.find_element(By.NAME, "queue").send_keys("two")
    form.find_element(By.NAME, "offset").send_keys("1")
    form.find_element(By.TAG_NAME, "button").click()
    error = wait(browser, lambda d: d.find_elements(By.ID, "error"))
    assert error[0].text == "queue must be a whole number, not 'two'"


def _send(port: int, count: int, stop: threading.Event) -> None:
    """`count` sends to topic Live over the remoting protocol, spread out so the chart sees them over seconds."""
    from remoting_client import Client, send_header
    from rocketstore.remoting.codes import RequestCode as RC
    from rocketstore.remoting.codes import ResponseCode as R

    async def main():
        c = await Client.connect(port)
        try:
            for i in range(count):
                if stop.is_set():
                    return
                r = await c.call(RC.SEND_MESSAGE, send_header("Live", i % 2), f"live {i}".encode())
                assert r.code == R.SUCCESS, r.remark
                await asyncio.sleep(0.05)
        finally:
            await c.close()

    asyncio.run(main())


def test_the_live_chart_follows_sends(served, browser, shots):
    s, _ = served
    browser.get(s.base + "/")
    chart = browser.find_element(By.ID, "rates-chart")
    wait(browser, lambda d: chart.get_attribute("data-samples") not in (None, ""))
    assert float(chart.get_attribute("data-peak-in")) == 0  # nothing sent since serve started
    stop = threading.Event()
    sender = threading.Thread(target=_send, args=(s.remoting_port, 100, stop))
    sender.start()
    try:
        wait(browser, lambda d: float(chart.get_attribute("data-peak-in") or 0) > 0)
        assert float(text_of(browser, "rate-in")) >= 0
        assert browser.find_elements(By.CSS_SELECTOR, "#rates-chart canvas")  # drawn by uPlot
    finally:
        sender.join(WAIT_S)
        stop.set()
    # the counters behind the chart: every message sent is counted in
    from console_harness import value

    assert value(s.metrics(), "rocketmq_messages_in", topic="Live") == 100
    wait(browser, lambda d: float(chart.get_attribute("data-peak-in") or 0) > 0)
    shots(browser, "overview")


def test_reset_an_offset_and_read_the_lag(served, browser, shots):
    s, _ = served
    browser.get(s.base + "/group?name=g1")
    assert text_of(browser, "group-lag") == str(ORDERS - 4 * COMMITTED)
    Select(browser.find_element(By.ID, "reset-topic")).select_by_visible_text("Orders")
    Select(browser.find_element(By.ID, "reset-to")).select_by_visible_text("offset")
    browser.find_element(By.ID, "reset-queue").send_keys("1")
    browser.find_element(By.ID, "reset-value").send_keys("0")
    browser.find_element(By.ID, "reset-submit").click()
    flash = wait(browser, lambda d: d.find_elements(By.ID, "flash"))
    assert flash[0].text == "reset g1 on Orders to offset: 1: 0"
    # queue 1 back to its start: its whole content is lag again
    assert text_of(browser, "group-lag") == str(ORDERS - 3 * COMMITTED)
    shots(browser, "group-reset")
    browser.get(s.base + "/groups")
    assert browser.find_element(By.CSS_SELECTOR, 'tr[data-group="g1"] td.lag').text == str(ORDERS - 3 * COMMITTED)
