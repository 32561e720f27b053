"""Java's String.hashCode, which RocketMQ uses for tagsCode and index key hashes."""

from functools import lru_cache
from struct import Struct

_U16 = {}


def _units(s: str) -> tuple[int, ...]:
    data = s.encode("utf-16-be", "surrogatepass")
    n = len(data) // 2
    st = _U16.get(n)
    if st is None:
        st = _U16.setdefault(n, Struct(f">{n}H"))
    return st.unpack(data)


@lru_cache(maxsize=65536)
def java_string_hash_py(s: str) -> int:
    """int32 hash over the UTF-16 code units, with Java's overflow: h = 31*h + unit."""
    h = 0
    for u in _units(s):
        h = (31 * h + u) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


# the chosen twin (rocketstore.engine.TWINS); java_string_hash_py stays the reference
from ..engine import java_string_hash  # noqa: F401  (the public name)


def index_key_hash(key: str) -> int:
    """IndexFile's key hash: abs(hashCode), with Integer.MIN_VALUE mapped to 0 as RocketMQ does."""
    h = java_string_hash(key)
    return 0 if h == -0x80000000 else abs(h)
