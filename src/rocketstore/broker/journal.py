"""A JSON snapshot plus an append-only journal: the pop state's durability at one fdatasync per change.

Rewriting a whole state file atomically costs three syncs (the file, its backup, the directory) and grows
with the state; an ack only changes one group's entry. So each change appends one line, {"k": key, "v":
value} (the key's whole new value, None to drop it), and syncs the journal; the snapshot is rewritten, and the
journal emptied, once the journal passes COMPACT_AT bytes and when the state is closed. Loading replays the
journal over the snapshot.

The journal must always end at a line boundary, or the next append would be glued to a fragment and the line
(an answered change) lost to the next load. So a torn last line (a crash mid-append: never answered) is cut
off, durably, when the journal is loaded; and an append that cannot write all of its bytes (a full disk: a
short write or ENOSPC) cuts its own fragment off again and raises JournalWriteError, so the change is not
answered as done.
"""

from __future__ import annotations

import json
import logging
import os

from ..config.files import read_with_backup, write_atomically
from ..errors import RocketStoreError

log = logging.getLogger("rocketstore.serve")
COMPACT_AT = 4 * 1024 * 1024
RECORD_START = b'{"k":'  # only ever at a record's start: inside a JSON string the quotes are escaped


class JournalWriteError(RocketStoreError, OSError):
    """A change could not be made durable in the journal (names the file and the cause)."""


def _complete_length(path: str) -> int:
    """The length of the file up to and including its last newline (0 without one)."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        pos = size
        while pos > 0:
            step = min(pos, 64 * 1024)
            fh.seek(pos - step)
            chunk = fh.read(step)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                return pos - step + nl + 1
            pos -= step
    return 0


def _truncate_durably(path: str, length: int) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, length)
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse_line(line: bytes, path: str, number: int):
    """One journal record, or None for a line that holds none. A line written by an older version after a
    torn fragment is the fragment glued to a whole record: the record (the last RECORD_START on) is kept."""
    try:
        return json.loads(line)
    except ValueError:
        start = line.rfind(RECORD_START)
        if start > 0:
            try:
                rec = json.loads(line[start:])
                log.warning("%s: line %d: a torn fragment before a whole record, skipped", path, number)
                return rec
            except ValueError:
                pass
        log.warning("%s: line %d is not a journal record, skipped", path, number)
        return None


class JournaledState:
    def __init__(self, snapshot_path: str):
        self.path = snapshot_path
        self.journal_path = snapshot_path + ".journal"
        self._fd: int | None = None
        self._size = 0

    def load(self, repair: bool = True) -> dict:
        """{key: value} as last saved: the snapshot's "table", then every whole journal line over it. With
        `repair`, a torn last line is cut off the journal (synced) so that later appends start on a line."""
        doc, problems = read_with_backup(self.path, json.loads)
        if doc is None and problems:
            raise ValueError(f"cannot read {self.path}: " + "; ".join(problems))
        table = dict((doc or {}).get("table", {}))
        if not os.path.exists(self.journal_path):
            return table
        whole = _complete_length(self.journal_path)
        if repair and whole != os.path.getsize(self.journal_path):
            log.warning(
                "%s: a torn last line (%d bytes) cut off", self.journal_path, os.path.getsize(self.journal_path) - whole
            )
            _truncate_durably(self.journal_path, whole)
        with open(self.journal_path, "rb") as fh:
            data = fh.read(whole)
        for number, line in enumerate(data.splitlines(), 1):
            rec = _parse_line(line, self.journal_path, number)
            if not isinstance(rec, dict) or "k" not in rec:
                continue
            if rec.get("v") is None:
                table.pop(rec["k"], None)
            else:
                table[rec["k"]] = rec["v"]
        return table

    def append(self, changes: dict, table: dict) -> None:
        """Make `changes` ({key: new value or None}) durable; `table` is the whole state, for compaction.
        Raises JournalWriteError when they could not be (the journal is left ending at a line boundary)."""
        if self._fd is None:
            try:
                os.makedirs(os.path.dirname(self.journal_path), exist_ok=True)
                self._fd = os.open(self.journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                self._size = _complete_length(self.journal_path)
                if self._size != os.fstat(self._fd).st_size:  # a fragment a failed cut left behind
                    os.ftruncate(self._fd, self._size)
                    os.fsync(self._fd)
            except OSError as e:
                if self._fd is not None:
                    os.close(self._fd)
                    self._fd = None
                raise JournalWriteError(e.errno, f"{self.journal_path}: cannot open: {e.strerror}") from e
        data = "".join(json.dumps({"k": k, "v": v}, separators=(",", ":")) + "\n" for k, v in changes.items()).encode()
        try:
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                if n <= 0:
                    raise OSError(28, "No space left on device (short write)")
                view = view[n:]
            os.fdatasync(self._fd)
        except OSError as e:
            self._cut_back()
            raise JournalWriteError(
                e.errno, f"{self.journal_path}: cannot append {len(data)} bytes: {e.strerror or e}"
            ) from e
        self._size += len(data)
        if self._size >= COMPACT_AT:
            try:
                self.compact(table)
            except OSError as e:  # the change is durable in the journal: compaction is tried again later
                log.error("%s: compaction failed: %s", self.path, e)

    def _cut_back(self) -> None:
        """After a failed append: the journal back to its last whole line. If even that fails, the file is
        closed; the next append reopens it and first cuts it to its last newline."""
        try:
            os.ftruncate(self._fd, self._size)
            os.fsync(self._fd)
        except OSError:
            os.close(self._fd)
            self._fd = None
            try:
                _truncate_durably(self.journal_path, _complete_length(self.journal_path))
            except OSError as e:
                log.error("%s: cannot cut a failed append off: %s", self.journal_path, e)

    def compact(self, table: dict) -> None:
        """The snapshot rewritten from `table`, then the journal emptied (a crash between the two replays
        lines the snapshot already holds: harmless, each line is a whole value)."""
        write_atomically(self.path, json.dumps({"version": 1, "table": table}, indent=1, sort_keys=True))
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.fsync(self._fd)
        elif os.path.exists(self.journal_path):
            os.truncate(self.journal_path, 0)
        self._size = 0

    def close(self, table: dict) -> None:
        self.compact(table)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
