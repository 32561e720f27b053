"""RocketMQ's RemotingCommand: the fields every request and response carries.

flag bit 0 marks a response (RPC_TYPE), bit 1 a oneway request (RPC_ONEWAY). `ext_fields` is the string map a
request's custom header travels in (RemotingCommand.makeCustomHeaderToNet writes every non-null header field as its
toString()). `serialize_type` is the header form the command was read in, or is to be written in."""

from dataclasses import dataclass

from .codes import LanguageCode, SerializeType

RESPONSE_FLAG = 1 << 0
ONEWAY_FLAG = 1 << 1


@dataclass(slots=True)  # slots: the server reads these fields several times a request
class RemotingCommand:
    code: int
    language: int = LanguageCode.JAVA
    version: int = 0
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: bytes = b""
    serialize_type: int = SerializeType.JSON
    # for the metrics, never on the wire: how many CommitLog records `body` holds (a pull's answer, so the counters
    # need not walk it again), and what a send stored: (topic, its properties, how many messages)
    records: int | None = None
    stored: tuple[str, dict, int] | None = None

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & ONEWAY_FLAG)

    def ext(self, name: str) -> str | None:
        return None if self.ext_fields is None else self.ext_fields.get(name)


def response_to(
    request: RemotingCommand,
    code: int,
    remark: str | None = None,
    ext_fields: dict[str, str] | None = None,
    body: bytes = b"",
    version: int = 0,
) -> RemotingCommand:
    """The answer to `request`: its opaque echoed and the response bit set (NettyRemotingAbstract.writeResponse).
    RocketMQ writes a response in the server's own serialization type (JSON unless configured otherwise), not in
    the request's: the C++ core client only reads JSON headers."""
    return RemotingCommand(
        code=code,
        language=LanguageCode.JAVA,
        version=version,
        opaque=request.opaque,
        flag=RESPONSE_FLAG,
        remark=remark,
        ext_fields=ext_fields,
        body=body,
        serialize_type=SerializeType.JSON,
    )
