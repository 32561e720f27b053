"""How the `rocketstore` command prints: data as plain text (never as Rich markup), tables page by page as
rows arrive, times as ISO dates and sizes in KiB/MiB in tables (raw numbers in --json), bodies encoded so
their bytes survive JSON.

Everything printed from a store (topics, tags, keys, bodies, properties) is data: a body holding `[/docs]`
or `[bold]` must print as those characters. So every Console here has markup and highlighting off and every
table cell is a rich Text, which is never parsed as markup.
"""

from __future__ import annotations

import base64
import datetime
import json
import re
import sys

import click
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

PAGE_ROWS = 50  # a table is printed every this many rows, so the first rows show at once

# table columns holding ms since the epoch, and byte counts: shown as ISO times and human sizes
TIME_SUFFIXES = ("Timestamp", "Time")
# table headers shortened so the default columns fit 80 characters (--json keeps the full names)
SHORT_HEADERS = {
    "queueId": "queue",
    "queueOffset": "qoffset",
    "storeTimestamp": "stored",
    "bornTimestamp": "born",
    "physicalOffset": "physOffset",
    "timeDiffSeconds": "timeDiff",
}
TEXT_COLUMNS = {
    "topic",
    "tags",
    "keys",
    "body",
    "problem",
    "properties",
    "file",
    "what recovery cut",
    "sql",
    "directory",
    "ext",
    "bitmap",
    "groups",
}
SIZE_COLUMNS = {
    "bytesOnDisk",
    "extBytesOnDisk",
    "extBytesWritten",
    "segmentSize",
    "dispatchBehindBytes",
    "bodyLength",
    "fileSize",
}


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """stdout's reader left: BrokenPipeError goes on to the command group, which ends quietly as for any
        other output (rich's own answer is exit status 1)."""
        self.quiet = True
        raise BrokenPipeError(32, "Broken pipe")


def console(stderr: bool = False) -> Console:
    """A console that prints text as it is: no markup, no highlighting of numbers or paths."""
    return _Console(stderr=stderr, markup=False, highlight=False, emoji=False)


def iso_time(ms: int) -> str:
    """ms since the epoch -> an ISO 8601 UTC time with milliseconds (2026-11-22T07:34:08.294Z)."""
    try:
        t = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def human_size(n: int) -> str:
    """1536 -> '1.5 KiB'; below 1 KiB the exact count in bytes."""
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    return str(n)


JAVA_LONG_MAX = (1 << 63) - 1  # a store time is a Java long of ms
SECONDS_LIKE = (10**8, 10**11)  # as ms: 1970-01-02 .. 1973-03-03; as seconds: 1973-03-03 .. 5138-11-16
_warned: set = set()


def parse_time(text: str, what: str) -> int:
    """ms since the epoch from ms or an ISO date-time (UTC unless it says otherwise), as the Spark options
    take them; a bad value is a usage error naming the option. A number that looks like seconds (a date
    within days of 1970 as ms, a later one as seconds) is taken as ms with a warning on stderr, once."""
    text = text.strip()
    if re.fullmatch(r"\d+", text):
        ms = int(text)
        if ms > JAVA_LONG_MAX:
            raise click.BadParameter(
                f"{text} ms is beyond any time a store holds (at most {JAVA_LONG_MAX}, Java's long)", param_hint=what
            )
        if SECONDS_LIKE[0] <= ms < SECONDS_LIKE[1] and (what, text) not in _warned:
            _warned.add((what, text))
            click.echo(
                f"rocketstore: warning: {what} {text} is read as milliseconds since the epoch, {iso_time(ms)}; "
                f"as seconds it would be {iso_time(ms * 1000)} (for that, give {ms * 1000} or an ISO time)",
                err=True,
            )
        return ms
    try:
        t = datetime.datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise click.BadParameter(
            f"expected ms since the epoch or an ISO date-time (2026-11-22T08:00:00Z), got {text!r}", param_hint=what
        ) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return int(t.timestamp() * 1000)


def shown(column: str, value) -> str:
    """A value as a table shows it: ISO time for time columns, human size for size columns."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, (dict, list)):
            return json.dumps(value, ensure_ascii=False)
        return str(value)
    if column.endswith(TIME_SUFFIXES) and value > 0:
        return iso_time(value)
    if column in SIZE_COLUMNS:
        return human_size(value)
    return str(value)


# ---------------------------------------------------------------- bodies
def body_json(body: bytes) -> dict:
    """A body for JSON: text when it is valid UTF-8, else base64; `bodyEncoding` says which."""
    body = bytes(body)
    try:
        return {"body": body.decode("utf-8"), "bodyEncoding": "utf-8"}
    except UnicodeDecodeError:
        return {"body": base64.b64encode(body).decode("ascii"), "bodyEncoding": "base64"}


def body_text(body: bytes, as_hex: bool = False) -> str:
    """A body for a table or a line: the text when it is valid UTF-8 and printable, else hex."""
    body = bytes(body)
    if as_hex:
        return body.hex()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "hex:" + body.hex()
    if all(c.isprintable() or c in "\t\n\r" for c in text):
        return text
    return "hex:" + body.hex()


# ---------------------------------------------------------------- printing
def echo_json(obj) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False))


def _table(columns: list[str]) -> Table:
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
    for c in columns:
        # numbers, times and ids stay on one line; text (topics, tags, keys, bodies) folds
        t.add_column(Text(SHORT_HEADERS.get(c, c)), overflow="fold", no_wrap=c not in TEXT_COLUMNS)
    return t


def print_records(title: str | None, rows, columns: list[str], out: Console | None = None) -> int:
    """One line per row, `name: value` pairs, as kafka-dump-log prints records with their payload: for rows
    with bodies, which no 80-column table can hold. Written as each row comes."""
    out = out or console()
    print_title(title, out)
    n = 0
    for row in rows:
        out.print(" ".join(f"{c}: {shown(c, row.get(c))}" for c in columns if c in row), soft_wrap=True)
        n += 1
        if n % PAGE_ROWS == 0:
            out.file.flush()
    out.file.flush()
    return n


def print_title(title: str | None, out: Console) -> None:
    if title:
        out.print(title, soft_wrap=True, style="bold")


def print_header(title: str, header: dict, out: Console | None = None) -> None:
    out = out or console()
    print_title(title, out)
    t = Table(show_header=False, box=box.SIMPLE, pad_edge=False)
    t.add_column(overflow="fold")
    t.add_column(overflow="fold")
    for k, v in header.items():
        t.add_row(Text(k), Text(shown(k, v)))
    out.print(t)


def print_table(
    title: str | None, rows, columns: list[str] | None = None, out: Console | None = None, page: int = PAGE_ROWS
) -> int:
    """Rows (dicts) as tables of `page` rows each, each printed as soon as it is full, so a long dump starts
    at once and holds one page in memory. Columns: the given ones, else the first row's. Returns the count."""
    out = out or console()
    n = 0
    buf: list[dict] = []
    for row in rows:
        buf.append(row)
        n += 1
        if len(buf) >= page:
            _flush(out, title, columns or list(dict.fromkeys(k for r in buf for k in r)), buf)
            title, buf = None, []
    if buf:
        _flush(out, title, columns or list(dict.fromkeys(k for r in buf for k in r)), buf)
    return n


def _flush(out: Console, title, columns, rows) -> None:
    print_title(title, out)
    t = _table(columns)
    for r in rows:
        t.add_row(*(Text(shown(c, r.get(c))) for c in columns))
    out.print(t)
    out.file.flush()


def print_json_lines(rows) -> int:
    """One JSON object per line, written as each row comes."""
    n = 0
    write = sys.stdout.write
    for row in rows:
        write(json.dumps(row, ensure_ascii=False) + "\n")
        n += 1
        if n % PAGE_ROWS == 0:
            sys.stdout.flush()
    sys.stdout.flush()
    return n
