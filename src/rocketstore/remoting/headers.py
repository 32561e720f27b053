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
    if text.isascii() and text.isdigit():  # the common case, cheaper than the pattern: no sign, ASCII digits
        value = int(text)
    elif _NUMBER.match(text):
        value = int(text)
    else:
        raise HeaderError(f'the custom field <{name}> is not a number: For input string: "{text}"')
    low, high = _RANGES[kind]
    if not low <= value <= high:
        raise HeaderError(f'the custom field <{name}> is out of range: For input string: "{text}"')
    return value


def read(cmd: RemotingCommand, required: dict[str, str], optional: dict[str, str] | None = None) -> dict:
    """The header fields of a request: `required` and `optional` map field names to kinds (str, int, long, bool).
    A missing optional field is None."""
    return Spec(required, optional).read(cmd)


class Spec:
    """A request header's fields, laid out once for a handler that reads the same header on every request:
    `required` and `optional` as for `read`, and `names` to hand a field back under another name (a V2 send
    header's short wire names under their long ones); errors name the field as it is on the wire."""

    __slots__ = ("_fields",)

    def __init__(self, required: dict[str, str], optional: dict[str, str] | None = None, names=None):
        names = names or {}
        fields = [(wire, kind, True, names.get(wire, wire)) for wire, kind in required.items()]
        fields += [(wire, kind, False, names.get(wire, wire)) for wire, kind in (optional or {}).items()]
        self._fields = tuple(fields)

    def read(self, cmd: RemotingCommand) -> dict:
        ext = cmd.ext_fields or {}
        out = {}
        for wire, kind, required, name in self._fields:
            text = ext.get(wire)
            if text is None:
                if required:
                    raise HeaderError(f"the custom field <{wire}> is null")
                out[name] = None
            elif kind == "str":
                out[name] = text
            else:
                out[name] = _parse(wire, kind, text)
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
