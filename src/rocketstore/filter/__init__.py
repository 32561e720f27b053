"""RocketMQ's SQL92 message filter and the bloom filter behind its consume-queue bit maps."""

from rocketstore.filter.bloom import (
    BloomFilter,
    BloomFilterData,
    consumer_bloom_key,
    get_bit,
    new_bits,
    set_bit,
)
from rocketstore.filter.sql92 import Filter, FilterEvaluationError, FilterSyntaxError, compile

__all__ = [
    "BloomFilter",
    "BloomFilterData",
    "Filter",
    "FilterEvaluationError",
    "FilterSyntaxError",
    "compile",
    "consumer_bloom_key",
    "get_bit",
    "new_bits",
    "set_bit",
]
