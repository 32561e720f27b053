"""A JSON snapshot plus an append-only journal: the pop state's durability at one fdatasync per change.

Rewriting a whole state file atomically costs three syncs (the file, its backup, the directory) and grows
with the state; an ack only changes one group's entry. So each change appends one line, {"k": key, "v":
value} (the key's whole new value, None to drop it), and syncs the journal; the snapshot is rewritten, and the
journal emptied, once the journal passes COMPACT_AT bytes and when the state is closed. Loading replays the
journal over the snapshot; a torn last line (a crash while appending, before the change was answered) is
ignored.
"""
from __future__ import annotations

import json
import os

from ..config_files import read_with_backup, write_atomically

COMPACT_AT = 4 * 1024 * 1024


class JournaledState:
    def __init__(self, snapshot_path: str):
        self.path = snapshot_path
        self.journal_path = snapshot_path + ".journal"
        self._fd: int | None = None
        self._size = 0

    def load(self) -> dict:
        """{key: value} as last saved: the snapshot's "table", then every whole journal line over it."""
        doc, problems = read_with_backup(self.path, json.loads)
        if doc is None and problems:
            raise ValueError(f"cannot read {self.path}: " + "; ".join(problems))
        table = dict((doc or {}).get("table", {}))
        if os.path.exists(self.journal_path):
            with open(self.journal_path, "rb") as fh:
                for line in fh:
                    if not line.endswith(b"\n"):
                        break                       # torn by a crash mid-append: never answered
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        break
                    if rec.get("v") is None:
                        table.pop(rec["k"], None)
                    else:
                        table[rec["k"]] = rec["v"]
        return table

    def append(self, changes: dict, table: dict) -> None:
        """Make `changes` ({key: new value or None}) durable; `table` is the whole state, for compaction."""
        if self._fd is None:
            os.makedirs(os.path.dirname(self.journal_path), exist_ok=True)
            self._fd = os.open(self.journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self._size = os.fstat(self._fd).st_size
        data = "".join(json.dumps({"k": k, "v": v}, separators=(",", ":")) + "\n"
                       for k, v in changes.items()).encode()
        os.write(self._fd, data)
        os.fdatasync(self._fd)
        self._size += len(data)
        if self._size >= COMPACT_AT:
            self.compact(table)

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
