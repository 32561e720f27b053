"""RocketMQ's bloom filter for SQL92 consumers (filter module util/BloomFilter, BitsArray,
BloomFilterData), bit-compatible, as pure functions on bytes.

How the broker uses it: every consumer group subscribing a topic with an SQL92 expression
gets k bit positions, ``calc_bit_positions(group + "#" + topic)``.  When a message is
dispatched, the broker evaluates every such expression of the topic and sets the positions
of the groups whose expression is TRUE in an m-bit map, stored in the consume queue's
extension (``bitMapLengthConsumeQueueExt`` = m).  At pull time a message whose map has all k
bits of the group set *may* match (it is then evaluated again on the message); one with a
missing bit surely does not.

Sizing (``createByFn(f, n)``): f is the false-positive rate in percent (1..99), n the
expected number of groups.  k = ceil(log(f/100) / log(0.5)); m = ceil(n * log2(100/f) *
log2(e)) rounded up to a multiple of 8.  The broker defaults (maxErrorRateOfBloomFilter=20,
expectConsumerNumUseFilter=32) give k=3, m=112 (14 bytes).

Positions: Guava's ``murmur3_128`` (seed 0) of the UTF-8 bytes, ``asLong()`` (the first 8
little-endian bytes of the 128-bit hash) split into hash1 = low 32 bits and hash2 = high 32
bits as Java ints; position i (1..k) is ``hash1 + i*hash2`` in 32-bit arithmetic, bits
flipped when negative, modulo m.

Bit layout (BitsArray): bit i lives in byte i // 8 under mask ``1 << (i % 8)`` (least
significant bit first).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import mmh3

__all__ = [
    "BloomFilter",
    "BloomFilterData",
    "DEFAULT_MAX_ERROR_RATE",
    "DEFAULT_EXPECT_CONSUMER_NUM",
    "consumer_bloom_key",
    "murmur3_128_as_long",
    "new_bits",
    "get_bit",
    "set_bit",
]

# BrokerConfig defaults
DEFAULT_MAX_ERROR_RATE = 20
DEFAULT_EXPECT_CONSUMER_NUM = 32


def _java_utf8(s: str) -> bytes:
    """String.getBytes(UTF_8): surrogate pairs joined, lone surrogates become '?'."""
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError:
        return "".join(piece for piece, _lone in _pair_up(s)).encode("utf-8")


def _pair_up(s: str):
    """Yield (text, is_lone_surrogate) pieces of s, joining valid surrogate pairs."""
    i, n = 0, len(s)
    while i < n:
        c = ord(s[i])
        if 0xD800 <= c <= 0xDBFF and i + 1 < n and 0xDC00 <= ord(s[i + 1]) <= 0xDFFF:
            cp = 0x10000 + ((c - 0xD800) << 10) + (ord(s[i + 1]) - 0xDC00)
            yield chr(cp), False
            i += 2
        elif 0xD800 <= c <= 0xDFFF:
            yield "?", True
            i += 1
        else:
            yield s[i], False
            i += 1


def murmur3_128_as_long(s: str) -> int:
    """Guava ``Hashing.murmur3_128().hashString(s, UTF_8).asLong()`` as a signed 64-bit int."""
    return mmh3.hash64(_java_utf8(s), 0, True, True)[0]


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - 0x100000000 if x & 0x80000000 else x


def consumer_bloom_key(consumer_group: str, topic: str) -> str:
    """The string ConsumerFilterManager hashes for a group's bits: ``group#topic``."""
    return f"{consumer_group}#{topic}"


@dataclass(frozen=True, slots=True)
class BloomFilterData:
    """The bit positions given to one requester and the bit count m they were computed for."""

    bit_pos: tuple[int, ...]
    bit_num: int


def new_bits(bit_length: int) -> bytearray:
    """A zeroed bit map of ``bit_length`` bits (BitsArray.create(bitLength))."""
    if bit_length < 0:
        raise ValueError("bit_length must not be negative")
    return bytearray((bit_length + 7) // 8)


def get_bit(bits: bytes | bytearray | memoryview, pos: int) -> bool:
    if pos < 0 or pos >= len(bits) * 8:
        raise IndexError(f"bit {pos} outside a {len(bits) * 8}-bit map")
    return bool(bits[pos >> 3] & (1 << (pos & 7)))


def set_bit(bits: bytearray, pos: int, value: bool = True) -> None:
    if pos < 0 or pos >= len(bits) * 8:
        raise IndexError(f"bit {pos} outside a {len(bits) * 8}-bit map")
    if value:
        bits[pos >> 3] |= 1 << (pos & 7)
    else:
        bits[pos >> 3] &= ~(1 << (pos & 7)) & 0xFF


class BloomFilter:
    """``BloomFilter.createByFn(f, n)``: f = error rate in percent, n = expected requesters."""

    __slots__ = ("f", "n", "k", "m")

    def __init__(self, f: int = DEFAULT_MAX_ERROR_RATE, n: int = DEFAULT_EXPECT_CONSUMER_NUM):
        if f < 1 or f >= 100:
            raise ValueError("f must be greater or equal than 1 and less than 100")
        if n < 1:
            raise ValueError("n must be greater than 0")
        self.f = int(f)
        self.n = int(n)
        error_rate = f / 100.0
        k = int(math.ceil(math.log(error_rate) / math.log(0.5)))
        if k < 1:  # pragma: no cover - cannot happen for 1 <= f < 100
            raise ValueError("hash function number is less than 1")
        self.k = k
        m = int(math.ceil(self.n * (math.log(1 / error_rate) / math.log(2)) * (math.log(math.e) / math.log(2))))
        self.m = int(8 * math.ceil(m / 8.0))

    @classmethod
    def create_by_fn(cls, f: int, n: int) -> "BloomFilter":
        return cls(f, n)

    # -- positions --------------------------------------------------------------------

    def calc_bit_positions(self, s: str) -> tuple[int, ...]:
        h = murmur3_128_as_long(s)
        hash1 = _int32(h)
        hash2 = _int32(h >> 32)
        m = self.m
        out = []
        for i in range(1, self.k + 1):
            c = _int32(hash1 + i * hash2)
            if c < 0:
                c = ~c
            out.append(c % m)
        return tuple(out)

    def generate(self, s: str) -> BloomFilterData:
        return BloomFilterData(self.calc_bit_positions(s), self.m)

    def consumer_data(self, consumer_group: str, topic: str) -> BloomFilterData:
        """The bloom data ConsumerFilterManager.register gives ``consumer_group`` on ``topic``."""
        return self.generate(consumer_bloom_key(consumer_group, topic))

    def is_valid(self, data: BloomFilterData | None) -> bool:
        return data is not None and data.bit_num == self.m and data.bit_pos is not None and len(data.bit_pos) == self.k

    # -- bit maps ---------------------------------------------------------------------

    def new_bits(self) -> bytearray:
        return new_bits(self.m)

    def _positions(self, what: str | BloomFilterData | Sequence[int]) -> Sequence[int]:
        if isinstance(what, str):
            return self.calc_bit_positions(what)
        if isinstance(what, BloomFilterData):
            if not self.is_valid(what):
                raise ValueError(f"bloom filter data may not belong to this filter: {what}, {self}")
            return what.bit_pos
        return what

    def _check(self, bits) -> None:
        if len(bits) * 8 != self.m:
            raise ValueError(f"length ({len(bits) * 8}) of bits is not equal to {self.m}")

    def hash_to(self, what: str | BloomFilterData | Sequence[int], bits: bytearray) -> None:
        """Set the positions of ``what`` (a string, its BloomFilterData or positions) in ``bits``."""
        positions = self._positions(what)
        self._check(bits)
        for p in positions:
            set_bit(bits, p)

    def is_hit(self, what: str | BloomFilterData | Sequence[int], bits: bytes | bytearray | memoryview) -> bool:
        """True when every position of ``what`` is set in ``bits``."""
        positions = self._positions(what)
        self._check(bits)
        return all(get_bit(bits, p) for p in positions)

    def check_false_hit(self, positions: Sequence[int], bits: bytes | bytearray | memoryview) -> bool:
        """True when all ``positions`` are already taken in ``bits`` (no bounds check on m)."""
        return all(get_bit(bits, p) for p in positions)

    def bitmap(self, matched: Iterable[BloomFilterData]) -> bytes:
        """The m-bit map CommitLogDispatcherCalcBitMap stores for a message, given the bloom
        data of the consumer filters that evaluated TRUE on it."""
        bits = self.new_bits()
        for data in matched:
            self.hash_to(data, bits)
        return bytes(bits)

    # -- value semantics ----------------------------------------------------------------

    def __eq__(self, other) -> bool:
        return isinstance(other, BloomFilter) and (self.f, self.n, self.k, self.m) == (
            other.f,
            other.n,
            other.k,
            other.m,
        )

    def __hash__(self) -> int:
        return hash((self.f, self.n, self.k, self.m))

    def __repr__(self) -> str:
        return f"BloomFilter(f={self.f}, n={self.n}, k={self.k}, m={self.m})"
