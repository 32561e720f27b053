import asyncio
import json
import os
import subprocess
import sys
import threading

import pytest

DRIVER = os.path.join(os.path.dirname(__file__), "cpp_client_driver.py")
CPP_CLIENT = "rocketmq==0.4.4"
# the C++-core client's own virtual environment: $ROCKETSTORE_CPP_CLIENT_VENV, else one made once under ~/.cache
DEFAULT_VENV = os.path.join(os.path.expanduser("~"), ".cache", "rocketstore", "venv-rocketmq-0.4.4")


class LoopThread:
    """An asyncio loop in a daemon thread: the servers under test run there while a client subprocess talks to
    them; `run` executes a coroutine on it and returns its result."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def loop_thread():
    lt = LoopThread()
    yield lt
    lt.stop()


def _venv_python(venv: str) -> str:
    return os.path.join(venv, "bin", "python")


@pytest.fixture(scope="session")
def cpp_python():
    """The interpreter of a virtual environment with the C++-core client, made (and pip-installed) on first use;
    a test fails when it cannot be made or its librocketmq.so does not load (PyPI is reachable where the tests run)."""
    venv = os.environ.get("ROCKETSTORE_CPP_CLIENT_VENV", DEFAULT_VENV)
    python = _venv_python(venv)
    if not os.path.exists(python):
        r = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            pytest.fail(f"cannot make a venv for the C++-core client: {r.stderr.strip()[-300:]}")
    probe = subprocess.run([python, "-c", "import rocketmq.client"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        r = subprocess.run(
            [python, "-m", "pip", "install", "-q", CPP_CLIENT], capture_output=True, text=True, timeout=600
        )
        if r.returncode != 0:
            pytest.fail(f"cannot install {CPP_CLIENT} (offline?): {r.stderr.strip()[-300:]}")
        probe = subprocess.run([python, "-c", "import rocketmq.client"], capture_output=True, text=True, timeout=60)
        if probe.returncode != 0:
            pytest.fail(f"{CPP_CLIENT} does not load here: {probe.stderr.strip()[-300:]}")
    return python


def run_cpp(python: str, home, scenario: str, namesrv: str, args: dict, timeout: float = 90):
    r = subprocess.run(
        [python, DRIVER, scenario, namesrv, json.dumps(args)],
        env=dict(os.environ, HOME=str(home)),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert r.returncode == 0, f"driver exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture
def cpp_client(cpp_python, tmp_path):
    """run(scenario, namesrv, args): one run of cpp_client_driver.py, HOME in the test's directory."""
    home = tmp_path / "cpp-home"
    home.mkdir()
    return lambda scenario, namesrv, args, timeout=90: run_cpp(cpp_python, home, scenario, namesrv, args, timeout)


@pytest.fixture(scope="session")
def java_classpath(tmp_path_factory):
    """The RocketMQ jars' classpath with every java/*.java compiled into a session directory, once (skips without
    the jars or a JDK)."""
    from serve_harness import compile_programs

    return compile_programs(tmp_path_factory.mktemp("java-classes"))
