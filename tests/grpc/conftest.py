import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from rocketstore.broker.address import free_port

DRIVER = os.path.join(os.path.dirname(__file__), "client_driver.py")
CONF = """mappedFileSizeCommitLog=10485760
brokerName=broker-test
minInvisibleTimeMillsForRecv=1000
grpcClientConsumerMinLongPollingTimeoutMillis=500
"""


class ServeProcess:
    """`rocketstore serve` in a subprocess on 127.0.0.1 and a free port."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.store = str(tmp_path / "store")
        self.conf = tmp_path / "broker.conf"
        self.conf.write_text(CONF)
        self.port = free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        self.home = tmp_path / "home"
        self.home.mkdir(exist_ok=True)
        self.proc = None
        self.lines: list[str] = []
        self.args: list[str] = []  # more `rocketstore serve` arguments
        self.listen: str | None = None  # --listen, when not the clients' endpoint (a wildcard)

    def env(self):
        return dict(os.environ, HOME=str(self.home), PYTHONUNBUFFERED="1")

    def start(self):
        self.lines = []
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rocketstore.cli",
                "serve",
                "--store",
                self.store,
                "--listen",
                self.listen or self.endpoint,
                "-c",
                str(self.conf),
                # the remoting side on free ports too (its defaults, 9876 and 10911, may be taken here)
                "--namesrv",
                f"127.0.0.1:{free_port()}",
                "--remoting",
                f"127.0.0.1:{free_port()}",
                *self.args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.env(),
        )
        ready = threading.Event()

        def pump():
            for line in self.proc.stdout:
                self.lines.append(line)
                if line.startswith("rocketstore serve: store"):  # the name server and broker log earlier
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        assert ready.wait(30), "the server did not start"
        assert any(f"listening on {self.listen or self.endpoint}" in x for x in self.lines), "".join(self.lines)
        return self

    def stop(self, sig=signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        rc = self.proc.wait(20)
        time.sleep(0.05)
        return rc

    def run(self, scenario: str, args: dict, timeout: float = 60):
        r = subprocess.run(
            [sys.executable, DRIVER, scenario, self.endpoint, json.dumps(args)],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture
def server(tmp_path):
    s = ServeProcess(tmp_path).start()
    yield s
    if s.proc.poll() is None:
        s.proc.kill()
        s.proc.wait(10)
