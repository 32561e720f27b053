"""What a segment holds in memory: pages are populated ahead of the write position (faster first writes), but
no more than a 64th of the file ahead (4 MiB at most). Measured from outside the code: the kernel's resident
size of the segment's mapping (/proc/self/smaps), right after the first append."""

import os
import sys

import pytest

from rocketstore.files.mapped_file import MappedFile

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps (Linux)")


def resident_kb(path: str) -> int:
    """Rss of the mappings of `path`'s inode in this process, in kB (by inode: a segment is mapped under the
    name it was created with, then linked in)."""
    inode = str(os.stat(path).st_ino)
    total, current = 0, None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and ":" not in head[0] and len(head) >= 5:
                current = head[4]  # address, perms, offset, device, inode, [path]
            elif head and head[0] == "Rss:" and current == inode:
                total += int(head[1])
    return total


@pytest.mark.parametrize(
    "size, most_kb",
    [
        (6_000_000, 128),  # a ConsumeQueue file (300,000 units of 20 bytes): 6,000,000 / 64 = 92 KiB ahead
        (64 * 1024 * 1024, 4 * 1024 + 64),  # a CommitLog segment: the 4 MiB chunk (16 MiB would be a 64th)
    ],
)
def test_first_append_populates_a_bounded_stretch(tmp_path, size, most_kb):
    path = str(tmp_path / f"{0:020d}")
    mf = MappedFile(path, size, writable=True, create=True)
    try:
        assert resident_kb(path) == 0  # reserved on disk, nothing in memory yet
        mf.append(b"x" * 20)
        rss = resident_kb(path)
        assert 4 <= rss <= most_kb, rss
    finally:
        mf.close()
