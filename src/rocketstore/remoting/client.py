"""An outbound remoting connection (one address of RocketMQ's NettyRemotingClient): requests written in the JSON
header form with the Java client's language and version, answers matched to them by opaque, as invokeSync does.
A broker uses it to register with remote name servers (broker/registration.py).

Requests the peer sends over the connection are not served (a name server sends none to a broker); they are
logged and dropped. When the connection ends, every request waiting on it fails with ConnectionError and the
client is `closed`: the caller connects a new one."""

from __future__ import annotations

import asyncio
import itertools
import logging

from . import frame
from .codes import LanguageCode, SerializeType, Version
from .command import RemotingCommand
from .errors import RemotingProtocolError

log = logging.getLogger("rocketstore.remoting.client")

DEFAULT_CONNECT_TIMEOUT_S = 3.0  # NettyClientConfig.connectTimeoutMillis


class RemotingClient:
    def __init__(self, host: str, port: int, *, max_frame: int = frame.DEFAULT_MAX_FRAME):
        self.host, self.port = host, port
        self.max_frame = max_frame
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future] = {}
        self._opaques = itertools.count(1)
        self._reading: asyncio.Task | None = None
        self._closed = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def closed(self) -> bool:
        return self._closed

    @classmethod
    async def connect(cls, host: str, port: int, timeout: float = DEFAULT_CONNECT_TIMEOUT_S) -> "RemotingClient":
        """A connected client; OSError (or TimeoutError) when the address does not answer within `timeout`."""
        client = cls(host, port)
        client._reader, client._writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        client._reading = asyncio.ensure_future(client._read_loop())
        return client

    async def invoke(
        self, code: int, ext_fields: dict[str, str] | None = None, body: bytes = b"", timeout: float = 3.0
    ) -> RemotingCommand:
        """Send a request and wait for its answer: TimeoutError after `timeout` seconds (the connection closed then,
        as NettyClientConfig.clientCloseSocketIfTimeout does by default), ConnectionError when the connection is or
        becomes closed."""
        if self._closed or self._writer is None:
            raise ConnectionError(f"the connection to {self.address} is closed")
        opaque = next(self._opaques)
        request = RemotingCommand(
            code=code,
            language=LanguageCode.JAVA,
            version=int(Version.V5_3_3),
            opaque=opaque,
            ext_fields=ext_fields,
            body=body,
            serialize_type=SerializeType.JSON,
        )
        answer = asyncio.get_running_loop().create_future()
        self._pending[opaque] = answer
        try:
            self._writer.write(frame.encode(request))
            await self._writer.drain()
            return await asyncio.wait_for(answer, timeout)
        except asyncio.TimeoutError:
            await self.close()
            raise asyncio.TimeoutError(f"no answer from {self.address} in {timeout} s (request code {code})") from None
        except (ConnectionError, OSError) as e:
            await self.close()
            raise ConnectionError(f"the connection to {self.address} failed: {e}") from None
        finally:
            self._pending.pop(opaque, None)

    async def _read_loop(self) -> None:
        reason: BaseException | str = "closed by the peer"
        try:
            while True:
                length = frame.frame_length(await self._reader.readexactly(4), self.max_frame)
                cmd = frame.decode(await self._reader.readexactly(length))
                if not cmd.is_response:
                    log.debug("%s sent request code %d, which a client does not serve", self.address, cmd.code)
                    continue
                answer = self._pending.get(cmd.opaque)
                if answer is not None and not answer.done():
                    answer.set_result(cmd)
        except asyncio.IncompleteReadError:
            pass
        except (OSError, RemotingProtocolError) as e:
            reason = e
        finally:
            self._fail_pending(reason)
            self._closed = True
            if self._writer is not None:
                self._writer.close()

    def _fail_pending(self, reason) -> None:
        for answer in self._pending.values():
            if not answer.done():
                answer.set_exception(ConnectionError(f"the connection to {self.address} ended: {reason}"))

    async def close(self) -> None:
        self._closed = True
        if self._reading is not None and self._reading is not asyncio.current_task():
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)
        self._fail_pending("closed")
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (ConnectionError, OSError):
                pass
