"""The archive's manifest on its own (rocketstore.files.archive_manifest, no Spark): which segments are
closed, where a destination may be, and the recovery of what a job killed half-way left."""

import json
import os

from rocketstore.files.archive_manifest import MOVES, ArchiveManifest, closed_segments, entry, local_dest

SEGMENT = 64 * 1024


def files_under(dest):
    """The archive's data files, relative to it (the manifest's own directory left out)."""
    return sorted(
        os.path.relpath(os.path.join(d, f), dest)
        for d, _, files in os.walk(dest)
        for f in files
        if not os.path.relpath(d, dest).startswith("_rocketstore_archive")
    )


def test_recovery_removes_an_uncommitted_segments_files_and_the_directories_only_it_had(tmp_path):
    """The manifest alone (no Spark): segment A committed, B killed half-way through its moves."""
    dest = tmp_path / "archive"
    a, b = "0" * 20, f"{SEGMENT:020d}"
    kept = f"topic=T/date=2026-11-21/{a}-00000.parquet"
    moved = [f"topic=T/date=2026-11-21/{b}-00000.parquet", f"topic=U/date=2026-11-22/{b}-00000.parquet"]
    not_yet = f"topic=U/date=2026-11-23/{b}-00000.parquet"
    for rel in [kept, *moved]:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(b"PAR1")
    with ArchiveManifest(str(dest)) as m:
        m.commit(entry(a, SEGMENT, "h", [{"path": kept, "rows": 1}], {}))
        os.makedirs(m.staged_dir(b))
        (tmp_path / "archive" / "_rocketstore_archive" / "staging" / f"stagedSegment={b}" / MOVES).write_text(
            json.dumps([*moved, not_yet])
        )
        assert m.recover() == [b]
    assert files_under(str(dest)) == [kept] and not (dest / "topic=U").exists()
    assert m.archived() == [a] and not m.is_archived(b) and not os.path.exists(m.staging)


def test_the_active_segment_is_the_last_holding_data():
    # a segment made ahead of the writer (RocketMQ's AllocateMappedFileService) holds nothing yet
    assert closed_segments(["a", "b", "c", "d"], [True, True, True, False]) == ["a", "b"]
    assert closed_segments(["a", "b"], [True, True]) == ["a"]
    assert closed_segments(["a"], [True]) == [] == closed_segments([], [])
    assert local_dest("file:///data/archive") == "/data/archive"
