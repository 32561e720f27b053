"""The transient store pool (RocketMQ's TransientStorePool, seed 002): write buffers that puts fill before a
commit service copies them into the mapped CommitLog segment, so puts never touch the page cache directly.

RocketMQ keeps `transientStorePoolSize` direct buffers of the segment size and reuses them; here each loan is
a fresh anonymous mapping (zero pages the kernel hands out lazily, returned when the segment is committed
in full), and the pool's size only limits how many are out at once: a segment created while none is free
is written directly, as RocketMQ's does when borrowBuffer finds none."""

from __future__ import annotations

import mmap
import threading


class TransientStorePool:
    def __init__(self, size: int, buffer_size: int):
        if size <= 0:
            raise ValueError(f"transient_store_pool_size must be positive, got {size}")
        self.size = size
        self.buffer_size = buffer_size
        self._lent = 0
        self._lock = threading.Lock()

    @property
    def available(self) -> int:
        return self.size - self._lent

    def borrow(self) -> mmap.mmap | None:
        with self._lock:
            if self._lent >= self.size:
                return None
            self._lent += 1
        return mmap.mmap(-1, self.buffer_size)

    def give_back(self, buf: mmap.mmap) -> None:
        with self._lock:
            self._lent -= 1
        try:
            buf.close()
        except BufferError:
            pass  # a slice still refers to it; it goes with that reference
