"""What the CLI's commands share: the STORE argument and the common options, opening a store with a clear error
for what is missing or locked, and the checks of a topic a command names."""

from __future__ import annotations

import os

import click

from .. import MessageStore
from ..errors import RocketStoreError, StoreLockedError
from ..validation import topic_problem
from . import main as M

store_arg = click.argument("store", type=click.Path(file_okay=False))
conf_opt = click.option("-c", "--conf", type=click.Path(dir_okay=False), help="A RocketMQ broker.conf.")
json_opt = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")


def one_line(e: BaseException | str) -> str:
    return " ".join(str(e).split())


def check_topic(topic: str) -> None:
    problem = topic_problem(topic)
    if problem:
        M.fail(problem)


def open_store(
    store: str,
    conf: str | None,
    read_only: bool = True,
    create: bool = False,
    locked_hint: str = "",
    trust_queues: bool = False,
    small: bool = False,
) -> MessageStore:
    if not os.path.isdir(store):
        if os.path.exists(store):
            M.fail(f"{store}: not a directory")
        if not create:
            M.fail(f"{store}: no store directory here" + ("" if read_only else " (give --create to make one)"))
    elif not create or os.listdir(store):  # --create makes a store where there is none, or in an empty dir
        M.require_store(store)
    cfg = M.load_config(conf)
    if small and not has_commitlog(store):
        cfg = cfg.with_small_files()  # a new store; an existing one keeps the sizes of its files
    try:
        return M.open_store(store, cfg, read_only=read_only, check_commitlog=not trust_queues)
    except StoreLockedError as e:
        M.fail(one_line(e) + locked_hint)
    except (RocketStoreError, OSError, ValueError) as e:
        M.fail(f"{store}: {one_line(e)}")


def has_commitlog(store: str) -> bool:
    try:
        return any(not n.startswith(".") for n in os.listdir(os.path.join(store, "commitlog")))
    except OSError:
        return False


CREATE_HELP = (
    "Make a store when the directory does not exist or is empty. A new store has RocketMQ's file sizes: a 1 GiB "
    "CommitLog segment and a 400 MiB index file, reserved on disk at once (about 1.4 GB for one message); "
    "--small, or -c broker.conf sizes, for less."
)
small_opt = click.option(
    "--small",
    is_flag=True,
    help="A new store gets small files: 16 MiB CommitLog segments, 6,000-unit queue files and 5,000-slot index "
    "files (about 17 MiB on disk for a first message) instead of RocketMQ's 1 GiB and 400 MiB. Sizes that "
    "-c broker.conf gives win; an existing store keeps the sizes of its files (every open reads them).",
)


def require_topic(s: MessageStore, topic: str) -> None:
    """A topic the store does not know is an error (as `queues` says), not "no messages"."""
    if topic not in s.topics() and topic not in s.topic_configs:
        s.close()
        M.fail(f"no topic {topic} in {s.root}")


def topic_queue_ids(s: MessageStore, topic: str) -> list[int]:
    ids = set(s.topics().get(topic, []))
    cfg = s.topic_configs.get(topic)
    if cfg:
        ids.update(range(int(cfg.get("readQueueNums") or 0)))
    return sorted(ids)


def queue_range(s: MessageStore, topic: str, q: int) -> tuple[int, int, int]:
    lo, hi = s.min_offset(topic, q), s.max_offset(topic, q)
    return lo, hi, max(hi - max(lo, 0), 0)
