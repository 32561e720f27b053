"""`rocketstore serve` in a subprocess for the benchmarks: started on free loopback ports with a broker.conf, ready
once its log says so, stopped with SIGTERM (killed after 30 s), its CPU seconds read from /proc."""

import os
import signal
import subprocess
import sys
import threading

CLK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a running process, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK  # utime, stime: fields 14 and 15 of the whole line


class ServeProcess:
    """`python -m rocketstore.cli serve STORE -c root/broker.conf ARGS...`; ready when a log line holds
    `ready_text`."""

    def __init__(self, root: str, conf: str, args: list[str], ready_text: str, ready_s: float = 60):
        self.launcher: list[str] = []  # a command the server runs under (valgrind, for bench/metrics_ir.py)
        self.store = os.path.join(root, "store")
        self.conf = os.path.join(root, "broker.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.args, self.ready_text, self.ready_s = args, ready_text, ready_s
        self.proc = None
        self.lines: list[str] = []

    def __enter__(self):
        self.proc = subprocess.Popen(
            [*self.launcher, sys.executable, "-m", "rocketstore.cli", "serve", self.store, "-c", self.conf, *self.args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )  # fmt: skip
        ready = threading.Event()

        def pump():
            for line in self.proc.stdout:
                self.lines.append(line)
                if self.ready_text in line:
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(self.ready_s) or self.proc.poll() is not None:
            raise SystemExit("the server did not start:\n" + "".join(self.lines))
        return self

    def cpu(self) -> float:
        return proc_cpu(self.proc.pid)

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
