"""The JSON header form (SerializeType.JSON): RemotingCommand written by fastjson.

fastjson writes the bean's getters sorted by name, nulls left out, the language and serialization type as enum
names: {"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":7,"remark":"r",
"serializeTypeCurrentRPC":"JSON","version":479}. `body` is transient and is not in the header.

Reading is what fastjson's parser does with a RemotingCommand: numbers for the int fields, the language by name,
extFields as a String map (a client that writes a number or a boolean there, as jsoncpp may, gets its text)."""

from . import fastjson
from .codes import LanguageCode, SerializeType
from .command import RemotingCommand
from .errors import RemotingProtocolError

INT32 = (-(2**31), 2**31 - 1)


def encode(cmd: RemotingCommand) -> bytes:
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
