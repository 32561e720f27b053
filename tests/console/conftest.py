"""The console tests' fixtures; the harness is console_harness.py."""

import pytest
from console_harness import ServeHttp


@pytest.fixture
def serve_http(tmp_path):
    s = ServeHttp(tmp_path)
    yield s
    if s.proc is not None and s.proc.poll() is None:
        s.proc.kill()
        s.proc.wait(10)
