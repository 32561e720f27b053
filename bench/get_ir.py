"""Instructions per get or query, for a loaded machine where the wall clock is noise (as put_ir.py for puts): run
under callgrind twice and take the difference (imports, setup and the puts cancel), e.g.

    for n in 100 2100; do PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python bench/get_ir.py $n raw 2>&1 | grep Collected; done     # (b - a) / 2,000

`python bench/get_ir.py N {raw|decode|query}`: 12,800 keyed messages are put into a fresh default store, which is
closed and opened read-only (no service thread runs to be counted), then N gets of 32 (raw: records not
decoded; decode: body, topic and keys of each read) or N queries by key (one hit each)."""

import shutil
import sys
import tempfile

from rocketstore import Message, MessageStore, StoreConfig

n, mode = int(sys.argv[1]), sys.argv[2]
M = 32 * 400
d = tempfile.mkdtemp(prefix="rs-ir-")
try:
    s = MessageStore.open(d, StoreConfig())
    # the store's parts were public before a1c1fe7: the script runs on either side of it
    cleanup = getattr(s, "_cleanup", None) or s.cleanup
    cleanup.commitlog.disk_usage = lambda path: 0.5  # a shared disk over 90% would refuse every put
    cleanup.commitlog.disk_full = False
    s.put_batch([Message(topic="T", body=b"x" * 100, tags="TagA", keys=f"k{i}") for i in range(M)], 0)
    s.close()
    s = MessageStore.open(d, StoreConfig(), read_only=True)
    for i in range(n):
        off = (i * 32) % M
        if mode == "query":
            assert len(s.query("T", f"k{off}", 32, 0, 2**62)) == 1
            continue
        r = s.get("g", "T", 0, off, 32)
        assert len(r.messages) == 32
        if mode == "decode":
            for m in r.messages:
                m.body, m.topic, m.keys
    s.close()
finally:
    shutil.rmtree(d, ignore_errors=True)
