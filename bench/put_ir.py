"""Instructions per put, for a loaded machine where the wall clock is noise: run under callgrind twice and
take the difference (imports and setup cancel), e.g.

    for n in 2000 12000; do valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python bench/put_ir.py $n keyed put 2>&1 | grep Collected; done     # (b - a) / 10,000

`python bench/put_ir.py N {keyed|plain} {put|batch}`: 12,000 messages are built either way, N are put
(one per call, or batches of 1,000) into a fresh default store, the index built, the store removed."""

import shutil
import sys
import tempfile

from rocketstore import Message, MessageStore, StoreConfig

n, kind, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
M = 12000
if kind == "keyed":
    msgs = [
        Message(topic="T", body=b"x" * 100, tags="TagA", keys=f"order-{i}", properties={"UNIQ_KEY": f"{i:032X}"})
        for i in range(M)
    ]
else:
    msgs = [Message(topic="T", body=b"x" * 100, tags="TagA") for i in range(M)]
d = tempfile.mkdtemp(prefix="rs-ir-")
try:
    s = MessageStore.open(d, StoreConfig())
    s._cleanup.commitlog.disk_usage = lambda path: 0.5  # a shared disk over 90% would refuse every put
    s._cleanup.commitlog.disk_full = False
    s.put(Message(topic="T", body=b"x", tags="TagA"), 0)
    if mode == "put":
        put = s.put
        for m in msgs[:n]:
            put(m, 0)
    else:
        for i in range(0, n, 1000):
            s.put_batch(msgs[i : min(i + 1000, n)], 0)
    s._index.build()
    assert s.max_offset("T", 0) == n + 1
    s.close()
finally:
    shutil.rmtree(d)
