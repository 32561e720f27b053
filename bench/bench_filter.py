"""SQL92 filtered gets with and without the ConsumeQueue ext bitmaps, against reading every message and
filtering in Python (issue #9); and what the bitmap dispatcher costs the puts.

    .venv/bin/python bench/bench_filter.py --quick            # 100,000 messages, 1 run
    .venv/bin/python bench/bench_filter.py                    # 500,000 messages, best of 3

Messages: 100-byte bodies, one topic, 4 queues (message i goes to queue i % 4), properties
{"region": one of 10 values (i % 10), "amount": str(i % 1000)}. The filter

    region = 'eu' AND amount < 100

matches exactly 1% (i % 10 == 0 and i % 1000 < 100: 10 of every 1,000); the count is computed from a plain
Python predicate on i and asserted, and every read mode must return exactly those messages.

Puts (put_batch of --batch messages, a fresh store each): default StoreConfig; ConsumeQueue ext on; ext and
bitmap dispatcher on with the filter registered before the first put (so every message gets its bitmap).

Reads (a full pass over the 4 queues, get(max_count=32) following next_begin_offset):
  (a) sql=SQL as the registered group: the ext bitmap refuses the non-matching units, the rest are read and
      the expression decides;
  (b) sql=SQL as a group with no registered filter, on the same store: no bitmap verdict, every unit's
      record is read and the expression decides; (b') the same on the store without the ext;
  (c) plain get (no filter) and a hand-written Python predicate on m.properties; on the ext+bitmap store
      and (c') on the store without the ext.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_store import code_version  # noqa: E402

import rocketstore  # noqa: E402
from rocketstore import GetStatus, Message, MessageStore, StoreConfig  # noqa: E402

TOPIC = "Shop"
QUEUES = 4
GROUP = "g-filter"  # registers SQL
GROUP_NOREG = "g-plain"  # registers nothing: get(sql=) has no bitmap verdict
REGIONS = ["eu", "us", "apac", "sa", "af", "me", "oc", "cn", "jp", "in"]
SQL = "region = 'eu' AND amount < 100"


def wanted(i: int) -> bool:
    """SQL by hand, on the message number."""
    return i % 10 == 0 and i % 1000 < 100


def py_filter(m) -> bool:
    """SQL by hand, on a read message's properties (mode c)."""
    p = m.properties
    return p.get("region") == "eu" and int(p.get("amount", "1000")) < 100


def make_batches(n: int, body_size: int, batch: int):
    body = (bytes(range(256)) * (body_size // 256 + 1))[:body_size]
    per_queue = [[] for _ in range(QUEUES)]
    for i in range(n):
        per_queue[i % QUEUES].append(
            Message(TOPIC, body, properties={"region": REGIONS[i % 10], "amount": str(i % 1000)})
        )
    return [(q, msgs[k : k + batch]) for q, msgs in enumerate(per_queue) for k in range(0, len(msgs), batch)]


def expected(n: int) -> list[tuple[int, int]]:
    """(queue, queue offset) of every matching message: message i is unit i // 4 of queue i % 4."""
    return sorted((i % QUEUES, i // QUEUES) for i in range(n) if wanted(i))


CONFIGS = {
    "plain": dict(),
    "ext": dict(enable_consume_queue_ext=True),
    "bitmap": dict(enable_consume_queue_ext=True, enable_calc_filter_bit_map=True),
}
PUT_LABELS = {
    "plain": "put_batch, default config",
    "ext": "put_batch, CQ ext on",
    "bitmap": "put_batch, ext + bitmap + filter",
}


def fill(d: str, kind: str, batches, n: int) -> tuple[MessageStore, float]:
    store = MessageStore.open(d, config=StoreConfig(**CONFIGS[kind]))
    store.register_filter(GROUP, TOPIC, SQL)  # before any put; only the bitmap store's dispatcher uses it
    put_batch = store.put_batch
    t0 = time.perf_counter()
    for q, b in batches:
        r = put_batch(b, q)
        if not r.ok:
            raise RuntimeError(f"put_batch: {r.status}")
    store.wait_dispatched()
    t = time.perf_counter() - t0
    got = sum(store.max_offset(TOPIC, q) for q in range(QUEUES))
    if got != n:
        raise RuntimeError(f"{kind}: {got} of {n} units dispatched")
    return store, t


def read_sql(store: MessageStore, group: str) -> tuple[list, int]:
    get = store.get
    out = []
    scanned = 0
    for q in range(QUEUES):
        off, hi = 0, store.max_offset(TOPIC, q)
        while off < hi:
            g = get(group, TOPIC, q, off, 32, sql=SQL)
            out += g.messages
            off = g.next_begin_offset
        scanned += hi
    return out, scanned


def read_python(store: MessageStore, group: str) -> tuple[list, int]:
    get = store.get
    out = []
    scanned = 0
    for q in range(QUEUES):
        off = 0
        while True:
            g = get(group, TOPIC, q, off, 32)
            if g.status is not GetStatus.FOUND:
                break
            scanned += len(g.messages)
            out += [m for m in g.messages if py_filter(m)]
            off = g.next_begin_offset
    return out, scanned


READS = [
    ("a", "get(sql), bitmap (registered group)", "bitmap", read_sql, GROUP),
    ("b", "get(sql), no bitmap (other group)", "bitmap", read_sql, GROUP_NOREG),
    ("b'", "get(sql), store without ext", "plain", read_sql, GROUP_NOREG),
    ("c", "get + Python filter", "bitmap", read_python, GROUP_NOREG),
    ("c'", "get + Python filter, store w/o ext", "plain", read_python, GROUP_NOREG),
]


def keys_of(msgs) -> list[tuple[int, int]]:
    return sorted((m.queue_id, m.queue_offset) for m in msgs)


def bitmap_verdicts(store: MessageStore) -> tuple[int, int]:
    """(units refused by the bitmap alone, units the bitmap let through) over the whole topic (not timed)."""
    mf = store.message_filter(GROUP, TOPIC, SQL)
    through = 0

    def count(t, e):
        nonlocal through
        hit = mf.matches(t, e)
        through += hit
        return False  # read no record: only the verdicts are counted

    for q in range(QUEUES):
        off, hi = 0, store.max_offset(TOPIC, q)
        while off < hi:
            off = store.get(GROUP, TOPIC, q, off, 32, matches=count).next_begin_offset
    return mf.bitmap_checks, through


def run_round(batches, n, want, base, put_times, read_times, checked) -> tuple[int, int]:
    """Fill the three stores (timing the puts), then every read mode (timed, its answer checked); the
    bitmap's verdicts (not timed). put_times / read_times None: a warm-up round."""
    stores, dirs = {}, []
    try:
        for kind in CONFIGS:
            d = tempfile.mkdtemp(prefix=f"bench-filter-{kind}-", dir=base)
            dirs.append(d)
            store, t = fill(d, kind, batches, n)
            if put_times is not None:
                put_times[kind].append(t)
            if kind == "ext":  # a put row only
                store.close()
                shutil.rmtree(d, ignore_errors=True)
            else:
                stores[kind] = store
        for key, _label, kind, fn, group in READS:
            gc.collect()
            t0 = time.perf_counter()
            got, scanned = fn(stores[kind], group)
            t = time.perf_counter() - t0
            if read_times is not None:
                read_times[key].append(t)
            if scanned != n:
                raise RuntimeError(f"({key}) scanned {scanned} of {n}")
            if keys_of(got) != want:
                raise RuntimeError(f"({key}) returned {len(got)} messages, not the {len(want)} expected")
            if any(not py_filter(m) for m in got):
                raise RuntimeError(f"({key}) returned a message whose properties do not match")
            checked.append(key)
        return bitmap_verdicts(stores["bitmap"])
    finally:
        for s in stores.values():
            s.close()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def fmt_rate(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:.2f} M"
    return f"{v / 1e3:.0f} k" if v >= 1e3 else f"{v:.0f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=None, help="messages (default 500,000; --quick 100,000)")
    ap.add_argument("--quick", action="store_true", help="100,000 messages, 1 run")
    ap.add_argument("--runs", type=int, default=None, help="runs per row, best taken (default 3, --quick 1)")
    ap.add_argument("--body", type=int, default=100, help="body bytes (default 100)")
    ap.add_argument("--batch", type=int, default=1000, help="put_batch size (default 1,000)")
    ap.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="messages in an untimed warm-up round (default max(20,000, N/10); 0: none)",
    )
    ap.add_argument("--tmpdir", default=None, help="where the temporary stores go (default: $TMPDIR or /tmp)")
    args = ap.parse_args(argv)
    n = args.messages or (100_000 if args.quick else 500_000)
    if n < 1000 or n % 1000:
        ap.error("--messages must be a positive multiple of 1,000 (so the filter matches exactly 1%)")
    runs = args.runs or (1 if args.quick else 3)
    warm = args.warmup if args.warmup is not None else max(20_000, n // 10)
    if warm % 1000:
        ap.error("--warmup must be a multiple of 1,000")

    logging.basicConfig(level=logging.ERROR)
    base = args.tmpdir or tempfile.gettempdir()
    need = n * (args.body + 300) * 3
    free = shutil.disk_usage(base).free
    if need > free:
        ap.error(f"{base} has {free / 1e9:.1f} GB free, the run needs about {need / 1e9:.1f} GB")
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, tmp {base}\n"
        f"rocketstore {rocketstore.__version__} from {code_version()}",
        flush=True,
    )
    t_start = time.perf_counter()

    want = expected(n)
    assert len(want) * 100 == n, (len(want), n)
    batches = make_batches(n, args.body, args.batch)

    put_times: dict[str, list[float]] = {k: [] for k in CONFIGS}
    read_times: dict[str, list[float]] = {r[0]: [] for r in READS}
    checked: list[str] = []
    if warm:
        print(f"warming up with {warm:,} messages ...", flush=True)
        run_round(make_batches(warm, args.body, args.batch), warm, expected(warm), base, None, None, [])
    gc.collect()
    gc.freeze()
    verdicts = None
    for run in range(runs):
        print(f"run {run + 1} of {runs}: {n:,} messages ...", flush=True)
        v = run_round(batches, n, want, base, put_times, read_times, checked if run == 0 else [])
        verdicts = verdicts or v

    matches = len(want)
    print()
    print(
        f"{n:,} messages of {args.body} B, {QUEUES} queues; `{SQL}` matches {matches:,} ({matches / n:.0%}); "
        f"best of {runs}\n"
    )
    print("| put | msgs/s | vs default | runs (s) |")
    print("|---|---:|---:|---|")
    best_put = {k: min(v) for k, v in put_times.items()}
    for k in CONFIGS:
        runs_s = ", ".join(f"{t:.2f}" for t in put_times[k])
        print(f"| {PUT_LABELS[k]} | {fmt_rate(n / best_put[k])} | {best_put['plain'] / best_put[k]:.2f}x | {runs_s} |")
    print()
    best = {k: min(v) for k, v in read_times.items()}
    print("| read mode | scanned msgs/s | matches/s | vs (a) bitmap | vs (b) no bitmap | vs (c) Python | runs (s) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for key, label, _kind, _fn, _group in READS:
        t = best[key]
        runs_s = ", ".join(f"{x:.3f}" for x in read_times[key])
        print(
            f"| ({key}) {label} | {fmt_rate(n / t)} | {fmt_rate(matches / t)} | {best['a'] / t:.2f}x "
            f"| {best['b'] / t:.2f}x | {best['c'] / t:.2f}x | {runs_s} |"
        )
    print()
    refused, through = verdicts
    print(
        f"bitmap verdicts (registered group, whole topic): {refused:,} units refused by the bitmap alone, "
        f"{through:,} let through ({through - matches:,} false positives, then refused by the expression)"
    )
    print(
        f"checked: modes {', '.join(checked)} each scanned all {n:,} units and returned exactly the "
        f"{matches:,} (queue, offset) pairs the Python predicate names"
    )
    print("ratios: a column is that column's mode time / this row's time (> 1: this row is faster)")
    print(f"\nwall time {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
