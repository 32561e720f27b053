"""The JSON header form (SerializeType.JSON): RemotingCommand written by fastjson.

fastjson writes the bean's getters sorted by name, nulls left out, the language and serialization type as enum
names: {"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":7,"remark":"r",
"serializeTypeCurrentRPC":"JSON","version":479}. `body` is transient and is not in the header.

Reading is what fastjson's parser does with a RemotingCommand: numbers for the int fields, the language by name,
extFields as a String map (a client that writes a number or a boolean there, as jsoncpp may, gets its text).

Every request and response passes through here, so each direction has a fast path for the shape clients and this
server use (plain int fields, a known language, string remark and extFields values) beside the general one
(`encode_bean`, `decode_general`), which stays the reference and takes everything else; tests hold the two to the
same output (tests/remoting/test_header_json_fast.py)."""

import re

import orjson

from .. import engine
from . import fastjson
from .codes import LanguageCode, SerializeType
from .command import RemotingCommand
from .errors import RemotingProtocolError

INT32 = (-(2**31), 2**31 - 1)
_LANGUAGE_NAMES = {int(code): code.name for code in LanguageCode}
_LANGUAGE_CODES = {code.name: int(code) for code in LanguageCode}


def _plain_int(value) -> bool:
    return isinstance(value, int) and value.__class__ is not bool


# orjson writes what fastjson writes for this shape (a dict's order, no spaces, UTF-8, the short escapes
# \b \t \n \f \r \" \\ and \u00XX for the other control characters) except for two things found afterwards in
# its output: it spells the hex digits of \u001A..\u001F (and \u000B, \u000E, \u000F) in lower case and leaves
# 127..159 unescaped (DEL, and U+0080..U+009F as C2 80..C2 9F), where fastjson writes \u00XX in upper case; a
# header with either, or a text orjson refuses (a lone surrogate), goes to the general writer. orjson, not json:
# each direction costs a send a third of json's time (bench/README.md, bench_remoting)
_NOT_AS_FASTJSON = re.compile(rb"\\u00[01][a-f]|\x7f|\xc2[\x80-\x9f]")


def encode(cmd: RemotingCommand) -> bytes:
    """The header as fastjson writes the bean (its fields in sorted order, nulls left out), in one call of json's
    C encoder for the common command (int fields, a string remark, string extFields values); anything else, and a
    text json would escape otherwise than fastjson, goes to `encode_bean`."""
    code, flag, opaque, version, remark, ext = cmd.code, cmd.flag, cmd.opaque, cmd.version, cmd.remark, cmd.ext_fields
    try:
        language = _LANGUAGE_NAMES[cmd.language]
    except (KeyError, TypeError):
        return encode_bean(cmd)
    if not (code.__class__ is int and flag.__class__ is int and opaque.__class__ is int and version.__class__ is int):
        if not (_plain_int(code) and _plain_int(flag) and _plain_int(opaque) and _plain_int(version)):
            return encode_bean(cmd)
    bean = {"code": code}
    if ext is not None:
        if ext.__class__ is not dict:
            return encode_bean(cmd)
        for key, value in ext.items():
            if key.__class__ is not str or value.__class__ is not str:
                if value is not None or key.__class__ is not str:
                    return encode_bean(cmd)
                ext = {k: v for k, v in ext.items() if v is not None}  # fastjson leaves a map's nulls out
                break
        bean["extFields"] = ext
    bean["flag"] = flag
    bean["language"] = language
    bean["opaque"] = opaque
    if remark is not None:
        if remark.__class__ is not str:
            return encode_bean(cmd)
        bean["remark"] = remark
    bean["serializeTypeCurrentRPC"] = "JSON"
    bean["version"] = version
    try:
        data = orjson.dumps(bean)
    except orjson.JSONEncodeError:  # a lone surrogate, an int past 64 bits
        return encode_bean(cmd)
    # isascii is quick (DEL, 127, is ASCII): the usual header skips the pattern
    if (not data.isascii() or b"\\u00" in data or b"\x7f" in data) and _NOT_AS_FASTJSON.search(data):
        return encode_bean(cmd)
    return data


def encode_bean(cmd: RemotingCommand) -> bytes:
    """The general writer: the command as a fastjson Bean."""
    try:
        language = LanguageCode(cmd.language).name
    except ValueError:
        language = LanguageCode.OTHER.name
    bean = fastjson.Bean(
        code=cmd.code,
        extFields=cmd.ext_fields,
        flag=cmd.flag,
        language=language,
        opaque=cmd.opaque,
        remark=cmd.remark,
        serializeTypeCurrentRPC=SerializeType.JSON.name,
        version=cmd.version,
    )
    return fastjson.dumpb(bean)


def _int(obj: dict, name: str) -> int:
    value = obj.get(name, 0)
    if value is None:
        return 0
    if isinstance(value, str) and value.lstrip("-").isdigit() and value.isascii():
        value = int(value)  # fastjson reads "12" into an int field too
    if isinstance(value, bool) or not isinstance(value, int):
        raise RemotingProtocolError(f"header field {name} is not an integer: {value!r}")
    if not INT32[0] <= value <= INT32[1]:
        raise RemotingProtocolError(f"header field {name} out of int range: {value}")
    return value


def _text(value) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, str)):
        return str(value)
    raise RemotingProtocolError(f"extFields value is not a string: {value!r}")


def decode(data: bytes) -> RemotingCommand:
    """The header as `decode_general` reads it; valid JSON with int fields in range, a known language name, a
    string remark and string extFields values is taken apart here, anything else goes to `decode_general`. With
    the extension the plain shape (no escapes, a flat object: what fastjson and this server write) is read in
    one C call (remoting.c decode_json_header), which answers None for any other and leaves it to this."""
    if engine.native is not None:
        got = engine.native.decode_json_header(data, _LANGUAGE_CODES)
        if got is not None:
            code, language, version, opaque, flag, remark, ext = got
            return RemotingCommand(code, language, version, opaque, flag, remark, ext, b"", SerializeType.JSON)
    return decode_py(data)


def decode_py(data: bytes) -> RemotingCommand:
    """`decode` without the C reader: the reference it is held to (tests/native/test_header_json_native.py)."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return decode_general(data)  # fastjson's bare map keys, NaN, a lone surrogate, bad UTF-8, or an error
    if obj.__class__ is not dict:
        return decode_general(data)
    get = obj.get
    code, version, opaque, flag = get("code", 0), get("version", 0), get("opaque", 0), get("flag", 0)
    low, high = INT32
    for value in (code, version, opaque, flag):
        if value.__class__ is not int or not low <= value <= high:
            return decode_general(data)
    language = get("language", "JAVA")
    language = _LANGUAGE_CODES.get(language) if language.__class__ is str else None
    remark = get("remark")
    ext = get("extFields")
    if language is None or (remark is not None and remark.__class__ is not str):
        return decode_general(data)
    if ext is not None:
        if ext.__class__ is not dict:
            return decode_general(data)
        for value in ext.values():
            if value.__class__ is not str:
                return decode_general(data)
    return RemotingCommand(code, language, version, opaque, flag, remark, ext, b"", SerializeType.JSON)


def decode_general(data: bytes) -> RemotingCommand:
    """The general reader: fastjson's leniency (numeric strings in int fields, numbers and booleans in
    extFields, unknown language names, bare integer map keys) and the errors."""
    obj = fastjson.loads(data)
    if not isinstance(obj, dict):
        raise RemotingProtocolError("JSON header is not an object")
    language = obj.get("language", LanguageCode.JAVA.name)
    if isinstance(language, str):
        # an unknown name: fastjson leaves the enum null; OTHER keeps the command answerable
        language = LanguageCode.__members__.get(language, LanguageCode.OTHER)
    elif isinstance(language, bool) or not isinstance(language, int):
        raise RemotingProtocolError(f"header field language is not a name: {language!r}")
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise RemotingProtocolError(f"header field remark is not a string: {remark!r}")
    ext = obj.get("extFields")
    if ext is not None:
        if not isinstance(ext, dict):
            raise RemotingProtocolError("header field extFields is not an object")
        ext = {k: _text(v) for k, v in ext.items() if v is not None}
    return RemotingCommand(
        code=_int(obj, "code"),
        language=int(language),
        version=_int(obj, "version"),
        opaque=_int(obj, "opaque"),
        flag=_int(obj, "flag"),
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.JSON,
    )
