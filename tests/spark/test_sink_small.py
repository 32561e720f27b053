"""Issue #24, section 4: the sink's `small` option gives a new store small files (a Spark sink to a new path
otherwise reserves RocketMQ's 1 GiB CommitLog segment and 400 MiB index file); later writes keep the sizes,
read from the files. The option is resolved on the driver (options.store_config), so no Spark session is
needed to check it."""

import os

from rocketstore import Message, MessageStore
from rocketstore.spark import options as O


def _blocks(root):
    return sum(os.stat(os.path.join(d, n)).st_blocks * 512 for d, _, names in os.walk(root) for n in names)


def test_small_option_sizes_a_new_store_and_later_writes_keep_them(tmp_path):
    root = str(tmp_path / "store")
    os.makedirs(root)  # what the sink does for a new path
    cfg = O.store_config({"path": root, "small": "true"}, root)
    assert cfg.mapped_file_size_commit_log == 16 * 1024 * 1024
    assert (cfg.max_hash_slot_num, cfg.max_index_num) == (5_000, 20_000)
    with MessageStore.open(root, cfg) as s:
        assert s.put(Message("Orders", b"x", keys=["k"]), 0).ok
    assert _blocks(root) < 20 * 1024 * 1024
    later = O.store_config({"path": root}, root)  # a later write, without the option
    assert later.mapped_file_size_commit_log == 16 * 1024 * 1024
    assert later.mapped_file_size_consume_queue == 6_000 * 20
    assert (later.max_hash_slot_num, later.max_index_num) == (5_000, 20_000)
    # an existing store keeps its sizes even with the option
    assert O.store_config({"path": root, "SMALL": "true"}, root) == later
    # without it, RocketMQ's defaults for a new store
    other = str(tmp_path / "other")
    os.makedirs(other)
    assert O.store_config({"path": other}, other).mapped_file_size_commit_log == 1024**3
