"""Custom request headers read from extFields as RemotingCommand.decodeCommandCustomHeader does: a field marked
@CFNotNull that is missing is an error ("the custom field <name> is null"); numbers parse as Java's
Integer/Long.parseLong (optional sign, ASCII digits, in range); booleans as Boolean.parseBoolean (only "true", any
case, is true). Response headers go back as extFields with every non-null field as text."""

import re

from .command import RemotingCommand
from .errors import HeaderError

_NUMBER = re.compile(r"[+-]?[0-9]+\Z")
_RANGES = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


def _parse(name: str, kind: str, text: str):
    if kind == "str":
        return text
    if kind == "bool":
        return text.lower() == "true"
    if not _NUMBER.match(text):
        raise HeaderError(f'the custom field <{name}> is not a number: For input string: "{text}"')
    value = int(text)
    low, high = _RANGES[kind]
    if not low <= value <= high:
        raise HeaderError(f'the custom field <{name}> is out of range: For input string: "{text}"')
    return value


def read(cmd: RemotingCommand, required: dict[str, str], optional: dict[str, str] | None = None) -> dict:
    """The header fields of a request: `required` and `optional` map field names to kinds (str, int, long, bool).
    A missing optional field is None."""
    ext = cmd.ext_fields or {}
    out = {}
    for name, kind in required.items():
        text = ext.get(name)
        if text is None:
            raise HeaderError(f"the custom field <{name}> is null")
        out[name] = _parse(name, kind, text)
    for name, kind in (optional or {}).items():
        text = ext.get(name)
        out[name] = None if text is None else _parse(name, kind, text)
    return out


def write(**fields) -> dict[str, str]:
    """A response header as extFields (Java's toString of each non-null field)."""
    out = {}
    for name, value in fields.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        else:
            out[name] = str(value)
    return out
