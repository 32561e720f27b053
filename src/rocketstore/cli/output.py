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
TEXT_MIN_WIDTH = 10  # a text column squeezed to fit 80 columns folds down to this width, no narrower
# columns never dropped nor cut in a table: ids and names (a cut msgId finds nothing; the README's promise),
# and the lag, which is what `groups` is run for. A table may name more (print_table's keep).
KEEP_COLUMNS = {"msgId", "uniqKey", "offsetMsgId", "topic", "group", "lag", "file", "directory"}

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
    "topics",
}
SIZE_COLUMNS = {
    "bytesOnDisk",
    "extBytesOnDisk",
    "extBytesWritten",
    "segmentSize",
    "dispatchBehindBytes",
    "bodyLength",
    "fileSize",
    "bytes",
    "bytesToFree",
    "bytesInPlace",
    "bytesNeeded",
    "bytesFree",
    "commitLogBytes",
    "queueFileSize",
    "indexFileSize",
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
wide_option = click.option(
    "--wide",
    is_flag=True,
    help="Every field as a column, each value whole on one line (lines as long as they need; by default a "
    "table fits the terminal: ids, names and the lag whole, the other columns folded or left out).",
)


def echo_json(obj) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False))


def _table(columns: list[str], widths: dict[str, int] | None = None, keep_whole: bool = True) -> Table:
    """A table of these columns. `widths` (from _fit): each column's room; a column that has its whole width
    stays on one line, the others (text: topics, tags, keys, bodies) fold. Nothing is ever cropped: a value
    wider than its column goes on the next line, never loses characters."""
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
    for c in columns:
        whole = widths is not None and keep_whole and c in widths
        t.add_column(
            Text(SHORT_HEADERS.get(c, c)),
            overflow="fold",
            no_wrap=whole,
            min_width=widths[c] if whole else None,
        )
    return t


def _natural_width(header: str, cells: list[str]) -> int:
    return max([len(header), *(max((len(line) for line in v.split("\n")), default=0) for v in cells)])


def _fit(out: Console, columns: list[str], cells: dict[str, list[str]], keep: set[str]) -> tuple[list[str], dict]:
    """The columns a table at the console's width shows, and the room each gets. Columns in `keep` (ids and
    names: msgId, uniqKey, topic, group; a command's point, as groups' lag) are never dropped and get their
    whole width; numbers and times too while they fit; text columns may fold down to TEXT_MIN_WIDTH. When the
    whole does not fit, the other columns go, the last first. Returns (columns shown, {column: whole width}
    for those that stay on one line)."""
    natural = {c: _natural_width(SHORT_HEADERS.get(c, c), cells[c]) for c in columns}
    keep = set(keep) | {c for c in columns if c.endswith(" lag")}  # `queues`: each group's lag ("<group> lag")

    def least(c: str) -> int:
        if c in TEXT_COLUMNS and c not in keep:
            return min(natural[c], TEXT_MIN_WIDTH)
        return natural[c]

    shown_cols = list(columns)
    room = out.width
    # each column costs 2 more characters (the divider or edge, and its padding)
    while sum(least(c) + 2 for c in shown_cols) > room:
        droppable = [c for c in shown_cols if c not in keep]
        if not droppable:
            break
        shown_cols.remove(droppable[-1])
    whole = {c: natural[c] for c in shown_cols if c not in TEXT_COLUMNS or c in keep}
    while whole and sum(whole.get(c, min(natural[c], TEXT_MIN_WIDTH)) + 2 for c in shown_cols) > room:
        # the essential values alone are wider than the screen: the widest folds (every character kept, on
        # more lines), never cut; the short ones (a lag) stay on one line
        del whole[max(whole, key=whole.get)]
    return shown_cols, whole


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
    title: str | None,
    rows,
    columns: list[str] | None = None,
    out: Console | None = None,
    page: int = PAGE_ROWS,
    keep=(),
    wide: bool = False,
) -> int:
    """Rows (dicts) as tables of `page` rows each, each printed as soon as it is full, so a long dump starts
    at once and holds one page in memory. Columns: the given ones, else the first row's. At the console's
    width the columns in KEEP_COLUMNS and `keep` are shown whole and the others give way (_fit); `wide`:
    every column whole, lines as long as they need. Returns the count."""
    out = out or console()
    keep = KEEP_COLUMNS | set(keep)
    n = 0
    buf: list[dict] = []
    for row in rows:
        buf.append(row)
        n += 1
        if len(buf) >= page:
            _flush(
                out, title, columns or list(dict.fromkeys(k for r in buf for k in r)), buf, keep, wide, n == len(buf)
            )
            title, buf = None, []
    if buf:
        _flush(out, title, columns or list(dict.fromkeys(k for r in buf for k in r)), buf, keep, wide, n == len(buf))
    return n


def _flush(
    out: Console, title, columns, rows, keep=frozenset(KEEP_COLUMNS), wide: bool = False, first: bool = True
) -> None:
    print_title(title, out)
    cells = {c: [shown(c, r.get(c)) for r in rows] for c in columns}
    if wide:
        widths = {c: _natural_width(SHORT_HEADERS.get(c, c), cells[c]) for c in columns}
        shown_cols, width = columns, max(out.width, sum(w + 2 for w in widths.values()))
    else:
        (shown_cols, widths), width = _fit(out, columns, cells, keep), None
    t = _table(shown_cols, widths)
    for i in range(len(rows)):
        t.add_row(*(Text(cells[c][i]) for c in shown_cols))
    if width is None:
        out.print(t)
    else:  # --wide: the console as wide as the table (rich renders no wider than its console)
        before = out.width
        out.width = width
        try:
            out.print(t, crop=False)
        finally:
            out.width = before
    left_out = [SHORT_HEADERS.get(c, c) for c in columns if c not in shown_cols]
    if left_out and first:  # said under the first page, not under each
        out.print(f"(left out to fit {out.width} columns: {', '.join(left_out)}; --wide shows every field)")
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
