"""A get's SQL92 filter (the broker's ExpressionMessageFilter): first the ConsumeQueue ext unit's bitmap,
then the expression on the record's properties.

The bitmap can only say "maybe": a bloom filter has false positives, never false negatives. So a unit is
skipped only when the group's bits are missing from a bitmap that speaks for its filter (the message was
stored while the filter lived, the bitmap has the filter's size); everything else goes on to the
expression, which decides.
"""

from __future__ import annotations

from .bloom import BloomFilter
from .manager import ConsumerFilterData
from .sql92 import Filter


class ExpressionMessageFilter:
    def __init__(self, compiled: Filter, data: ConsumerFilterData | None = None, bloom: BloomFilter | None = None):
        self.compiled = compiled
        # the group's registered filter counts only for the same expression
        if data is not None and (
            data.expression != compiled.expression or bloom is None or not bloom.is_valid(data.bloom)
        ):
            data = None
        self.data = data
        self.bloom = bloom
        self.bitmap_checks = 0  # units decided by the bitmap alone (for benchmarks and tests)
        # the group's bits as (byte, mask) in BitsArray's layout (bit i: byte i // 8, mask 1 << i % 8), so the
        # per-unit test is a few byte ANDs (BloomFilter.is_hit re-validates its arguments on every call)
        self._masks = tuple((p // 8, 1 << (p % 8)) for p in data.bloom.bit_pos) if data is not None else ()
        self._bytes = data.bloom.bit_num // 8 if data is not None else 0

    def matches(self, tags_code, ext_unit) -> bool:
        """isMatchedByConsumeQueue for an SQL92 subscription."""
        data = self.data
        if data is None or ext_unit is None or not data.msg_in_live(ext_unit.msg_store_time):
            return True
        bits = ext_unit.filter_bit_map
        if bits is None or len(bits) != self._bytes:
            return True
        hit = all(bits[i] & m for i, m in self._masks)
        if not hit:
            self.bitmap_checks += 1
        return hit

    def accept(self, message) -> bool:
        """isMatchedByCommitLog: the expression on the message's properties (only TRUE matches)."""
        return self.compiled.matches(message.properties)
