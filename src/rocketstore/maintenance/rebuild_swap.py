"""A rebuild's new ConsumeQueues and index files go into the store whole or not at all, whenever the process
is killed (issue #17). Both engines (the local one, recovery's dispatch; rocketstore.rebuild's pieces, in
this process or on Spark) write into a staging store and hand it to `StagedRebuild.commit`.

Under the store's lock (taken before anything is read or moved; nothing changes when it cannot be had):

1. `.rebuild-new/` is a staging store: `commitlog` a relative symlink to the store's CommitLog, copies of
   `config/` and `checkpoint`, and the new consumequeue/, batchconsumequeue/, index/, consumequeue_ext/
   and checkpoint written there. The store's own files are not touched: killed now, the store is as it
   was, and the next open or rebuild deletes `.rebuild-new/`.
2. The commit point: every file under it fsynced, then `.rebuild-new/` renamed `.rebuild-ready/`.
3. `abort` written (a crash flag for anyone opening the store midway, RocketMQ included), the old files
   moved into `.rebuild-old/`, then `.rebuild-ready/` renamed `.rebuild-swap/`.
4. The new files moved in from `.rebuild-swap/`, its checkpoint over the store's, `abort` removed.
5. `.rebuild-old/` and `.rebuild-swap/` deleted.

Steps 3 to 5 are `finish_interrupted`: the commit runs it, and so does every open for writing (and every
rebuild) before it reads a file, so a swap killed at any step is finished by whoever opens the store next.
Each step can be run again after a kill: which directories exist says how far it got (`.rebuild-ready/`:
step 3; `.rebuild-swap/`: step 4; only `.rebuild-old/`: step 5). The directories are fsynced after
their renames. A read-only open cannot finish a swap and refuses the store until one for writing has.
"""

from __future__ import annotations

import logging
import os
import re
import shutil

from ..config.store_config import StoreConfig
from ..errors import RocketStoreError, StoreOpenError
from ..store.lock import StoreLock

log = logging.getLogger("rocketstore.rebuild")

# what a rebuild writes again. consumequeue_ext goes with the ConsumeQueues: the local engine writes it again
# when the config enables the ext; otherwise the rebuilt queues hold plain tagsCodes and the old ext units
# would be left with nothing referring to them
REBUILT = ("consumequeue", "batchconsumequeue", "index", "consumequeue_ext")
NEW, READY, SWAP, OLD = ".rebuild-new", ".rebuild-ready", ".rebuild-swap", ".rebuild-old"
# where rocketstore before issue #17 moved the old files (`.rebuild-<ms>`): superseded by any new rebuild
_LEGACY = re.compile(r"\.rebuild-\d+$")


class RebuildError(RocketStoreError):
    """The rebuild cannot go on; the message says what is wrong and where."""


# ---------------------------------------------------------------------------- durability
def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(top: str) -> None:
    """Every file and directory under `top` to disk (symlinks are not followed: the CommitLog stays out)."""
    for dirpath, _dirs, files in os.walk(top, topdown=False):
        for name in files:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(dirpath)


def _remove_staging(path: str) -> None:
    """Delete a staging store; its `commitlog` symlink first, so nothing could ever reach the real one."""
    link = os.path.join(path, "commitlog")
    if os.path.islink(link):
        os.unlink(link)
    shutil.rmtree(path)


# ---------------------------------------------------------------------------- finishing a swap
def finish_interrupted(root: str, committing: bool = False) -> None:
    """Settle whatever a rebuild left in `root` (the caller holds the lock): a staging store never committed
    is deleted (the old files are in place and untouched), a committed one is swapped in, from wherever a
    kill stopped the swap; leftovers of a finished swap are deleted. (`committing`: the commit itself is
    swapping, nothing was interrupted.)"""
    new, ready, swap, old = (os.path.join(root, n) for n in (NEW, READY, SWAP, OLD))
    if os.path.isdir(new):
        log.info("%s: deleting %s, the files of a rebuild that did not finish (the old ones are in place)", root, NEW)
        _remove_staging(new)
        fsync_dir(root)
    if not committing and (os.path.isdir(ready) or os.path.isdir(swap)):
        log.warning("%s: finishing a rebuild that was interrupted while swapping its files in", root)
    if os.path.isdir(ready):
        _move_old_out(root, old)
        os.rename(ready, swap)
        fsync_dir(root)
    if os.path.isdir(swap):
        _move_new_in(root, swap)
    leftovers = [d for d in (old, swap) if os.path.isdir(d)]
    if os.path.isdir(old):
        shutil.rmtree(old)
    if os.path.isdir(swap):
        _remove_staging(swap)
    if leftovers:
        fsync_dir(root)
    for name in sorted(os.listdir(root)):
        if _LEGACY.match(name) and not committing:
            log.warning(
                "%s: %s holds files a rebuild by an older rocketstore moved aside and did not put back; "
                "the queues and index in place may be incomplete: run `rocketstore rebuild` (which "
                "deletes it)",
                root,
                os.path.join(root, name),
            )


def _move_old_out(root: str, old: str) -> None:
    """Step 3: the crash flag, then the old files into `.rebuild-old/` (while `.rebuild-ready/` exists no new
    file is in the root yet, so whatever is there is old)."""
    abort = os.path.join(root, "abort")
    if not os.path.exists(abort):
        with open(abort, "w") as fh:
            fh.write(str(os.getpid()))
            fh.flush()
            os.fsync(fh.fileno())
    os.makedirs(old, exist_ok=True)
    fsync_dir(root)
    for sub in REBUILT:
        src, dst = os.path.join(root, sub), os.path.join(old, sub)
        if os.path.lexists(src):
            if os.path.lexists(dst):  # an older leftover: ours is the one to keep aside
                shutil.rmtree(dst)
            os.rename(src, dst)
    fsync_dir(old)
    fsync_dir(root)


def _move_new_in(root: str, swap: str) -> None:
    """Step 4: the new files in (the old ones are all out), the new checkpoint, and no more crash flag: the
    new files were made by a store that closed cleanly."""
    for sub in REBUILT:
        src, dst = os.path.join(swap, sub), os.path.join(root, sub)
        if not os.path.lexists(src):
            continue
        if os.path.lexists(dst):
            raise StoreOpenError(
                f"{dst}: in the way of the rebuilt {src}, which should replace it; move one of them away by hand"
            )
        os.rename(src, dst)
    checkpoint = os.path.join(swap, "checkpoint")
    if os.path.exists(checkpoint):
        os.replace(checkpoint, os.path.join(root, "checkpoint"))
    fsync_dir(root)
    abort = os.path.join(root, "abort")
    if os.path.exists(abort):
        os.unlink(abort)
        fsync_dir(root)


def refuse_pending_swap(root: str) -> None:
    """For a read-only open: a swap left half done cannot be finished without writing, and what the root
    holds meanwhile is neither the old files nor the new ones."""
    for name in (READY, SWAP):
        if os.path.isdir(os.path.join(root, name)):
            raise StoreOpenError(
                f"{os.path.join(root, name)}: a rebuild was interrupted while swapping its files "
                f"in; open the store for writing (e.g. `rocketstore recover`) to finish it"
            )


# ---------------------------------------------------------------------------- the frame
class StagedRebuild:
    """`with StagedRebuild(root, config) as stage:` takes the lock, settles what an earlier rebuild left,
    reads the file sizes from the files in place (so the rebuilt ones keep them: `stage.config`) and makes
    the staging store `stage.staging`; the builder writes there, then calls `stage.commit()`. Leaving the
    block without a commit deletes the staging store and leaves the store as it was."""

    def __init__(self, root: str, config: StoreConfig | None = None):
        self.root = os.path.abspath(os.fspath(root))
        self.staging = os.path.join(self.root, NEW)
        self.config = config or StoreConfig()
        self.present: list[str] = []  # which of REBUILT the store had
        self.committed = False
        self._lock: StoreLock | None = None

    def __enter__(self) -> "StagedRebuild":
        from ..store.file_sizes import resolve_file_sizes

        if not os.path.isdir(os.path.join(self.root, "commitlog")):
            raise RebuildError(f"{self.root}: no CommitLog here to rebuild from")
        self._lock = StoreLock.take(self.root)
        try:
            for name in sorted(os.listdir(self.root)):
                if _LEGACY.match(name) and os.path.isdir(os.path.join(self.root, name)):
                    log.warning(
                        "%s: deleting %s, files an interrupted rebuild moved aside (superseded by this one)",
                        self.root,
                        name,
                    )
                    shutil.rmtree(os.path.join(self.root, name))
            finish_interrupted(self.root)
            self.config = resolve_file_sizes(self.root, self.config)
            self.present = [sub for sub in REBUILT if os.path.exists(os.path.join(self.root, sub))]
            self._make_staging()
        except BaseException:
            self._lock.release()
            raise
        return self

    def _make_staging(self) -> None:
        os.makedirs(self.staging)
        os.symlink(os.path.join(os.pardir, "commitlog"), os.path.join(self.staging, "commitlog"))
        if os.path.isdir(os.path.join(self.root, "config")):
            shutil.copytree(os.path.join(self.root, "config"), os.path.join(self.staging, "config"))
        if os.path.exists(os.path.join(self.root, "checkpoint")):
            shutil.copy2(os.path.join(self.root, "checkpoint"), os.path.join(self.staging, "checkpoint"))
        # no `abort`: the staging store starts with no queues, so its recovery dispatches every record (a
        # recovery after a crash would start at the checkpoint's segment and leave the earlier ones out)

    def commit(self) -> None:
        """The staged files replace the store's (steps 2 to 5 above). The staging store must be closed."""
        if os.path.exists(os.path.join(self.staging, "abort")):
            raise RebuildError(f"{self.staging}: the staging store did not close cleanly; the store is unchanged")
        fsync_tree(self.staging)
        os.rename(self.staging, os.path.join(self.root, READY))
        self.committed = True
        fsync_dir(self.root)
        finish_interrupted(self.root, committing=True)

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if not self.committed and os.path.isdir(self.staging):
                _remove_staging(self.staging)
        finally:
            self._lock.release()
