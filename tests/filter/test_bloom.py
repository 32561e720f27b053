"""RocketMQ's bloom filter (filter/util/BloomFilter, BitsArray, BloomFilterData).

Expected values are hand-derived:
* murmur3 vectors are Guava's Murmur3Hash128Test known answers (seed 0, the seed RocketMQ
  uses): HashCode bytes = little-endian(expected1) + little-endian(expected2), so
  ``asLong()`` is expected1.
* m and k follow BloomFilter's constructor arithmetic (worked below each case).
* bit positions follow calcBitPositions on those hashes (worked in the comments), and
  bytes follow BitsArray's layout: bit i is byte i // 8, mask 1 << (i % 8).
"""

import random

import pytest

from rocketstore.filter import BloomFilter, BloomFilterData, consumer_bloom_key, get_bit, new_bits, set_bit
from rocketstore.filter.bloom import murmur3_128_as_long


def signed64(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


# ---------------------------------------------------------------------------------------
# murmur3_128 (Guava) known answers
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected1",
    [
        ("hell", 0x629942693E10F867),
        ("The quick brown fox jumps over the lazy dog", 0xE34BBC7BBC071B6C),
        ("The quick brown fox jumps over the lazy cog", 0x658CA970FF85269A),
        ("", 0),  # empty input, seed 0: every lane stays 0 through fmix
    ],
)
def test_murmur3_known_answers(text, expected1):
    assert murmur3_128_as_long(text) == signed64(expected1)


def test_murmur3_hashes_java_utf8():
    # String.getBytes(UTF_8): a surrogate pair is one code point, a lone surrogate is '?'
    assert murmur3_128_as_long("\ud83d\ude00") == murmur3_128_as_long("\U0001f600")
    assert murmur3_128_as_long("a\ud800b") == murmur3_128_as_long("a?b")
    assert murmur3_128_as_long("\u00e9") != murmur3_128_as_long("\u00c3\u00a9")


# ---------------------------------------------------------------------------------------
# createByFn sizing
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "f,n,k,m",
    [
        # f=20: k = ceil(ln .2 / ln .5) = ceil(2.32) = 3; m = ceil(32 * log2(5) * log2(e))
        #       = ceil(32 * 2.3219 * 1.4427) = ceil(107.19) = 108 -> multiple of 8: 112
        (20, 32, 3, 112),  # broker defaults
        (20, 64, 3, 216),  # ConsumerFilterManager(): 214.39 -> 215 -> 216
        # f=10: k = ceil(3.32) = 4; 20 * 3.3219 * 1.4427 = 95.85 -> 96
        (10, 20, 4, 96),
        (10, 30, 4, 144),  # 143.78 -> 144
        # f=12: k = ceil(3.06) = 4; 20 * 3.0589 * 1.4427 = 88.26 -> 89 -> 96
        (12, 20, 4, 96),
        # f=1: k = ceil(6.64) = 7; 300 * 6.6439 * 1.4427 = 2875.5 -> 2876 -> 2880
        (1, 300, 7, 2880),
        # f=50: k = 1; 1 * 1 * 1.4427 -> 2 -> 8
        (50, 1, 1, 8),
    ],
)
def test_sizing(f, n, k, m):
    bf = BloomFilter.create_by_fn(f, n)
    assert (bf.f, bf.n, bf.k, bf.m) == (f, n, k, m)


def test_default_sizing_is_the_brokers():
    bf = BloomFilter()
    assert (bf.f, bf.n, bf.k, bf.m) == (20, 32, 3, 112)


@pytest.mark.parametrize("f,n", [(0, 10), (100, 10), (-1, 10), (10, 0)])
def test_sizing_rejects(f, n):
    with pytest.raises(ValueError):
        BloomFilter(f, n)


def test_equality_like_bloom_filter_test():
    a, b = BloomFilter(10, 20), BloomFilter(10, 20)
    c, d = BloomFilter(12, 20), BloomFilter(10, 30)
    assert a == b and hash(a) == hash(b)
    assert a != c and a != d and d != c


# ---------------------------------------------------------------------------------------
# Bit positions
# ---------------------------------------------------------------------------------------


def test_positions_hell():
    # asLong = 0x629942693e10f867: hash1 = 0x3e10f867 = 1041299559, hash2 = 0x62994269 = 1654211177
    # i=1: 2695510736 wraps to -1599456560, flipped 1599456559, % 112 = 15
    # i=2: 4349721913 wraps to 54754617, % 112 = 57
    # i=3: 6003933090 wraps to 1708965794, % 112 = 18
    assert BloomFilter(20, 32).calc_bit_positions("hell") == (15, 57, 18)


def test_positions_fox():
    # asLong = 0xe34bbc7bbc071b6c: hash1 = (int)0xbc071b6c = -1140384916,
    # hash2 = (int)0xe34bbc7b = -481575813
    # i=1: -1621960729, flipped 1621960728, % 112 = 24
    # i=2: -2103536542, flipped 2103536541, % 112 = 29
    # i=3: -2585112355 wraps to 1709854941, % 112 = 109
    bf = BloomFilter(20, 32)
    assert bf.calc_bit_positions("The quick brown fox jumps over the lazy dog") == (24, 29, 109)


def test_positions_empty_string():
    # hash 0: every combined hash is 0
    assert BloomFilter(1, 300).calc_bit_positions("") == (0,) * 7


def test_generate_and_consumer_data():
    bf = BloomFilter(20, 32)
    assert bf.generate("hell") == BloomFilterData((15, 57, 18), 112)
    assert consumer_bloom_key("CID_group", "TopicTest") == "CID_group#TopicTest"
    assert bf.consumer_data("CID_group", "TopicTest") == bf.generate("CID_group#TopicTest")
    assert bf.is_valid(bf.consumer_data("g", "t"))


# ---------------------------------------------------------------------------------------
# BitsArray layout and hashTo / isHit
# ---------------------------------------------------------------------------------------


def test_bits_layout():
    bits = new_bits(16)
    assert bits == bytearray(2)
    set_bit(bits, 0)
    assert bytes(bits) == b"\x01\x00"
    set_bit(bits, 7)
    assert bytes(bits) == b"\x81\x00"
    set_bit(bits, 8)
    assert bytes(bits) == b"\x81\x01"
    set_bit(bits, 15)
    assert bytes(bits) == b"\x81\x81"
    set_bit(bits, 0, False)
    assert bytes(bits) == b"\x80\x81"
    assert get_bit(bits, 7) and get_bit(bits, 15) and not get_bit(bits, 0)
    assert len(new_bits(9)) == 2
    with pytest.raises(IndexError):
        get_bit(bits, 16)


def test_hash_to_bytes():
    bf = BloomFilter(20, 32)
    bits = bf.new_bits()
    bf.hash_to("hell", bits)
    # bits 15 -> byte 1 mask 0x80; 18 -> byte 2 mask 0x04; 57 -> byte 7 mask 0x02
    assert bytes(bits) == bytes([0, 0x80, 0x04, 0, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0])
    # fox adds 24 -> byte 3 0x01, 29 -> byte 3 0x20, 109 -> byte 13 0x20
    bf.hash_to(bf.generate("The quick brown fox jumps over the lazy dog"), bits)
    assert bytes(bits) == bytes([0, 0x80, 0x04, 0x21, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0x20])


def test_bitmap_of_matched_consumers():
    bf = BloomFilter(20, 32)
    hell = bf.generate("hell")
    fox = bf.generate("The quick brown fox jumps over the lazy dog")
    assert bf.bitmap([]) == bytes(14)
    assert bf.bitmap([hell, fox]) == bytes([0, 0x80, 0x04, 0x21, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0x20])
    only_hell = bf.bitmap([hell])
    assert bf.is_hit(hell, only_hell)
    assert not bf.is_hit(fox, only_hell)


def test_is_hit_like_bloom_filter_test():
    bf = BloomFilter(10, 20)
    bits = bf.new_bits()
    bf.hash_to("CID_abc_efg", bits)
    assert bf.is_hit("CID_abc_efg", bits)
    assert not bf.is_hit("CID_abc_123", bits)  # asserted by RocketMQ's test too
    bf.hash_to("CID_abc_123", bits)
    assert bf.is_hit("CID_abc_efg", bits)
    assert bf.is_hit("CID_abc_123", bits)


def test_is_hit_positions_by_hand():
    bf = BloomFilter(20, 32)
    bits = bytearray(14)
    bits[1] = 0x80
    bits[2] = 0x04
    assert not bf.is_hit("hell", bits)  # bit 57 missing
    bits[7] = 0x02
    assert bf.is_hit("hell", bytes(bits))
    assert bf.is_hit((15, 57, 18), memoryview(bytes(bits)))


def test_length_and_validity_checks():
    bf = BloomFilter(20, 32)
    with pytest.raises(ValueError):
        bf.hash_to("hell", bytearray(13))
    with pytest.raises(ValueError):
        bf.is_hit("hell", bytes(15))
    foreign = BloomFilterData((1, 2, 3), 128)
    assert not bf.is_valid(foreign)
    assert not bf.is_valid(None)
    assert not bf.is_valid(BloomFilterData((1, 2), 112))  # k differs
    assert not BloomFilter(1, 300).is_valid(foreign)
    with pytest.raises(ValueError):
        bf.is_hit(foreign, bytes(14))


def test_bloom_filter_data_equality():
    a = BloomFilterData((1, 2, 3), 128)
    assert a == BloomFilterData((1, 2, 3), 128)
    assert a != BloomFilterData((1, 2, 3), 129)
    assert a != BloomFilterData((1, 2, 3, 4), 128)
    assert hash(a) == hash(BloomFilterData((1, 2, 3), 128))


def test_check_false_hit():
    bf = BloomFilter(20, 32)
    bits = bytearray(14)
    assert not bf.check_false_hit((15, 57, 18), bits)
    for p in (15, 57, 18):
        set_bit(bits, p)
    assert bf.check_false_hit((15, 57, 18), bits)
    assert not bf.check_false_hit((15, 57, 19), bits)


def test_false_hit_rate_like_bloom_filter_test():
    # BloomFilterTest.testCheckFalseHit: n random names into createByFn(1, 300), at most f% collide
    bf = BloomFilter(1, 300)
    rnd = random.Random(20240601)
    bits = bf.new_bits()
    false_hits = 0
    for _ in range(bf.n):
        name = "".join(chr(rnd.randrange(97, 123)) for _ in range(rnd.randrange(10, 137)))
        pos = bf.calc_bit_positions(name)
        if bf.check_false_hit(pos, bits):
            false_hits += 1
        bf.hash_to(pos, bits)
    assert false_hits <= bf.f * bf.n // 100
