"""The remote-address patterns of RocketMQ's plain ACL (RemoteAddressStrategyFactory): `globalWhiteRemoteAddresses`
and an account's `whiteRemoteAddress` in plain_acl.yml. A client whose address matches skips the signature check.

Forms: blank (matches nothing); "*", "*.*.*.*" or "*:*:*:*:*:*:*:*" (everything); "192.168.1.{1,2,3}" (a list by
its last part); "10.1.1.1,10.1.1.2" (a list); with "*" or "a-b" in one part a range on that part (the first such
part after the first decides, as RangeRemoteAddressStrategy reads it: "192.168.*.*" looks at the third number
only); anything else one address. IPv4 and IPv6; an IPv6 address compares in its expanded upper-case form
(AclUtils.expandIP). A pattern that does not parse is an AclConfigError naming it."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from ..errors import RocketStoreError

Matcher = Callable[[str], bool]


class AclConfigError(RocketStoreError, ValueError):
    """A plain_acl.yml that RocketMQ would refuse to load (its AclException at startup)."""


def is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
        return True
    except ValueError:
        return False


def is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
        return True
    except ValueError:
        return False


def expand_ip(text: str, parts: int) -> str:
    """AclUtils.expandIP: "::" widened so the text has `parts` groups, each group left-padded to 4 hex digits,
    upper case. An IPv4 address comes back unchanged (no colons, groups of 4+ characters)."""
    text = text.upper()
    pad = parts - text.count(":")
    if pad > 0:
        text = text.replace("::", ":" * (pad + 1))
    return ":".join(g if len(g) >= 4 else g.rjust(4, "0") for g in text.split(":"))


def _tokens(text: str, sep: str) -> list[str]:
    """commons-lang StringUtils.split: empty tokens dropped."""
    return [t for t in text.split(sep) if t]


def _bad(text: str) -> AclConfigError:
    return AclConfigError(f"NetAddress examine Exception netAddress is {text}")


def _normal(addr: str) -> str:
    return expand_ip(addr, 8) if is_ipv6(addr) else addr


def _address_set(addresses: list[str], pattern: str) -> Matcher:
    wanted = set()
    for a in addresses:
        if is_ipv4(a):
            wanted.add(a)
        elif is_ipv6(a):
            wanted.add(expand_ip(a, 8))
        else:
            raise _bad(f"{a} (in {pattern})")
    return lambda host: _normal(host) in wanted


def _one(pattern: str) -> Matcher:
    if not (is_ipv4(pattern) or is_ipv6(pattern)):
        raise _bad(pattern)
    want = expand_ip(pattern, 8).upper()
    return lambda host: expand_ip(host, 8).upper() == want


def _bounds(value: str, hexadecimal: bool, pattern: str) -> tuple[int, int] | None:
    """The range one part of a range pattern gives: "*" the whole part, "a-b" a to b, anything else none."""
    top = 0xFFFF if hexadecimal else 255
    if value == "*":
        return 0, top
    if "-" in value:
        ends = _tokens(value, "-")
        if value.startswith("-") or len(ends) != 2:
            raise AclConfigError(f"RangeRemoteAddressStrategy netAddress examine scope Exception value {value} ")
        try:
            start, end = (int(e, 16 if hexadecimal else 10) for e in ends)
        except ValueError:
            raise _bad(pattern) from None
        if not (0 <= start <= end <= top):
            raise AclConfigError(
                f"RangeRemoteAddressStrategy netAddress examine scope Exception start is {start} , end is {end}"
            )
        return start, end
    return None


def _range_v4(pattern: str) -> Matcher:
    parts = _tokens(pattern, ".")
    for index in (1, 2, 3):
        bounds = _bounds(parts[index].strip(), False, pattern) if index < len(parts) else None
        if bounds is not None and bounds[1] > 0:
            break
    else:
        raise _bad(pattern)
    # the parts before the range must be numbers of an address with four parts (AclUtils.verify)
    dotted = _tokens(pattern, ".")
    if len(dotted) != 4 or not all(p.strip().isdigit() and int(p) <= 255 for p in dotted[: index - 1]):
        raise AclConfigError(f"NetAddress examine scope Exception netAddress is {pattern}")
    head = "".join(p.strip() + "." for p in parts[:index])
    start, end = bounds

    def match(host: str) -> bool:
        if not is_ipv4(host) or not host.startswith(head):
            return False
        rest = host[len(head) :].split(".")
        return start <= int(rest[0]) <= end

    return match


def _range_v6(pattern: str) -> Matcher:
    star, minus = "*" in pattern, "-" in pattern
    if star and not pattern.endswith("*"):
        raise AclConfigError(f"NetAddress examine scope Exception netAddress is {pattern}")
    parts = _tokens(pattern, ":")
    for i in range(1, len(parts)):
        bounds = _bounds(parts[i].strip(), True, pattern)
        if bounds is not None and bounds[1] > 0:
            break
    else:
        raise _bad(pattern)
    # the fixed groups: the text before the range part (and before a trailing ":*" after it), expanded
    cut = pattern.rfind(":")
    if star and minus:
        cut = pattern.rfind(":", 0, cut)
    head = expand_ip(pattern[:cut], 6 if (star and minus) else 7)
    index = len(_tokens(head, ":"))
    start, end = bounds

    def match(host: str) -> bool:
        if not is_ipv6(host):
            return False
        full = expand_ip(host, 8).upper()
        if not full.startswith(head):
            return False
        return start <= int(full[5 * index : 5 * index + 4], 16) <= end

    return match


def matcher(pattern: str | None) -> Matcher:
    """The test one pattern of plain_acl.yml stands for: host -> matches."""
    pattern = (pattern or "").strip()
    if not pattern:
        return lambda host: False
    if pattern in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return lambda host: True
    if pattern.endswith("}"):
        sep = ":" if ":" in pattern else "."
        parts = _tokens(pattern, sep)
        if not parts[-1].startswith("{") or (sep == "." and len(parts) < 4):
            raise AclConfigError(
                f"MultipleRemoteAddressStrategy netAddress examine scope Exception netAddress: {pattern}"
            )
        prefix = pattern[: pattern.index("{")]
        return _address_set([prefix + p for p in _tokens(parts[-1][1:-1], ",")], pattern)
    if "," in pattern:
        return _address_set(_tokens(pattern, ","), pattern)
    if "*" in pattern or "-" in pattern:
        return _range_v6(pattern) if ":" in pattern else _range_v4(pattern)
    return _one(pattern)
