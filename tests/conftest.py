import os

# Keep hypothesis quick and deterministic in CI.
from hypothesis import settings

settings.register_profile("ci", max_examples=150, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=150, deadline=None)
PROFILE = "ci" if os.environ.get("CI") else "dev"
settings.load_profile(PROFILE)

TESTS = os.path.dirname(os.path.abspath(__file__))

# The suite in parts: (name, directories under tests/, what it covers, minutes on 2 cores as README.md's "Running
# the tests" measured them). `make test` runs them all; `make test-<name>` or `pytest --part <name>` one of them.
PARTS = [
    (
        "lib",
        ("formats", "files", "log", "services", "store", "filter", "golden", "rebuild", "examples"),
        "the library, golden RocketMQ stores",
        "5",
    ),
    ("native", ("native",), "the C engine against the pure Python one", "5"),
    ("cli", ("cli",), "the `rocketstore` command, run as a process", "4"),
    ("broker", ("grpc", "remoting", "console"), "`rocketstore serve` and its clients, /metrics, the console", "5"),
    ("fault", ("fault",), "damaged files, SIGKILLed writers", "2"),
    ("spark", ("spark",), "the Spark source, sink, rebuild and archive", "3"),
]


def pytest_addoption(parser):
    names = ", ".join(p[0] for p in PARTS)
    parser.addoption(
        "--part",
        action="append",
        default=[],
        choices=[p[0] for p in PARTS],
        help=f"run only this part of the suite (repeatable): {names}",
    )


def _dirs(config) -> set[str] | None:
    chosen = config.getoption("--part")
    return {d for name, dirs, _, _ in PARTS if name in chosen for d in dirs} if chosen else None


def pytest_ignore_collect(collection_path, config):
    """--part: the other parts' directories are not even imported (Spark's and the servers' imports are slow)."""
    dirs = _dirs(config)
    if dirs is None:
        return None
    rel = os.path.relpath(str(collection_path), TESTS)
    if rel.startswith("..") or rel == ".":
        return None
    top = rel.split(os.sep)[0]
    if os.path.isdir(os.path.join(TESTS, top)) and top not in dirs:
        return True
    return None


def pytest_report_header(config):
    """What the run is made of, for a newcomer reading the start of the output."""
    chosen = config.getoption("--part")
    lines = [f"hypothesis profile: {PROFILE}"]
    lines.append("the suite's parts (run one with `make test-<part>`; the README says more):")
    width = max(len(p[2]) for p in PARTS)
    for name, dirs, what, minutes in PARTS:
        mark = "*" if not chosen or name in chosen else " "
        where = f"tests/{dirs[0]}" if len(dirs) == 1 else f"tests/{{{','.join(dirs)}}}"
        lines.append(f" {mark} {name:6s} ~{minutes:>2s} min  {what:{width}s}  {where}")
    known = {d for _, dirs, _, _ in PARTS for d in dirs}
    for d in sorted(os.listdir(TESTS)):
        if os.path.isdir(os.path.join(TESTS, d)) and d not in known and not d.startswith(("_", ".")):
            lines.append(f"   tests/{d} is in no part: add it to PARTS in tests/conftest.py")
    return lines
