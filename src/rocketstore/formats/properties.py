"""Message properties: UTF-8 `name \\x01 value \\x02` pairs, parsed exactly as RocketMQ's MessageDecoder does."""

from ..engine import java_string_hash


NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# MessageConst names the store itself reads.
TAGS = "TAGS"
KEYS = "KEYS"
UNIQ_KEY = "UNIQ_KEY"
DELAY = "DELAY"
WAIT = "WAIT"
TRAN_MSG = "TRAN_MSG"
PGROUP = "PGROUP"
INNER_NUM = "INNER_NUM"
INNER_BASE = "INNER_BASE"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"  # a timer message's delivery time (ms), or ...
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"  # ... its delay from the put, in s
TIMER_DELAY_MS = "TIMER_DELAY_MS"  # ... or in ms
CRC32 = "__CRC32#"
KEY_SEPARATOR = " "

# "__CRC32#" + \x01 + 10 digits + \x02: 20 bytes (RocketMQ's comment says 18; the code reserves 20).
CRC32_RESERVED_LEN = len(CRC32) + 1 + 10 + 1


def parse_properties_py(raw: bytes | str) -> dict[str, str]:
    """string2messageProperties: empty names and empty values are dropped; a missing final \\x02 is fine.

    Splitting on bytes is exact because \\x01 and \\x02 never occur inside a UTF-8 multibyte sequence.
    """
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    out: dict[str, str] = {}
    for part in raw.split(b"\x02"):
        k, sep, v = part.partition(b"\x01")
        if sep and k and v:
            out[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return out


MAX_PROPERTY_VALUES = 64  # the most names property_values takes at once


def property_values_py(raws, names) -> list[tuple]:
    """For each raw properties (bytes-like, str or None), the tuple of parse_properties(raw).get(name) for each
    of `names`, in order: a run's columns of the few properties a filter reads, without a dict per record."""
    names = tuple(names)
    if len(names) > MAX_PROPERTY_VALUES:
        raise ValueError("property_values takes at most 64 names")
    absent = (None,) * len(names)
    out = []
    for raw in raws:
        if raw is None or len(raw) == 0:
            out.append(absent)
            continue
        props = parse_properties_py(raw)
        out.append(tuple(props.get(n) for n in names))
    return out


# the chosen twins (rocketstore.engine.TWINS); the *_py functions stay the reference
from ..engine import parse_properties, property_values  # noqa: F401  (the public name)


def storable_text(value) -> bool:
    """A tag, key, property name or value the properties string carries as it is: a str holding neither
    separator. With one, the record would read back as other properties (a tag "a\x02UNIQ_KEY\x01x" is a
    forged UNIQ_KEY); RocketMQ's proxy refuses control characters in all of them (GrpcValidator)."""
    return isinstance(value, str) and NAME_VALUE_SEPARATOR not in value and PROPERTY_SEPARATOR not in value


def format_properties(props: dict[str, str]) -> str:
    """messageProperties2String: every pair followed by \\x02; None values skipped."""
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items() if v is not None)


def crc32_property(crc: int) -> bytes:
    """The 20-byte appended CRC entry; RocketMQ writes the 10 digits least-significant first."""
    digits = bytearray(b"0000000000")
    i = 0
    while crc > 0 and i < 10:
        digits[i] = 48 + crc % 10
        crc //= 10
        i += 1
    return b"__CRC32#\x01" + bytes(digits) + b"\x02"


def parse_crc32_digits(text: str) -> int:
    """Inverse of crc32_property's digits: read least-significant digit first (as Java does, no validation)."""
    value = 0
    for ch in reversed(text):
        value = (value * 10 + (ord(ch) - 48)) & 0xFFFFFFFF  # Java int arithmetic wraps
    return value - 0x100000000 if value & 0x80000000 else value


def java_hashmap_order(names: list[str]) -> list[str]:
    """The order a java.util.HashMap created with the default capacity (16, doubled past 3/4 full)
    iterates these names inserted in this order: by bucket ((h ^ h >>> 16) & (capacity - 1), h the
    String.hashCode), then insertion order within a bucket. RocketMQ rewrites an inner batch's properties
    from such a map (Message.properties) after adding INNER_BASE, so the stored order is this one."""
    capacity = 16
    while len(names) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = java_string_hash(name) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return [n for _, _, n in sorted((bucket(n), i, n) for i, n in enumerate(names))]
