"""An asyncio server for RocketMQ's remoting protocol (the part of NettyRemotingServer/NettyRemotingAbstract a name
server or broker needs).

Each connection reads frames (length checked against `max_frame` before the frame is read; a bad frame closes the
connection, as NettyDecoder does): a read takes what the socket holds, up to READ_CHUNK, and every whole frame in it
is taken before the next read (a frame longer than that has its rest read at once). A handler is a coroutine that returns the response (its opaque and response bit
are set here) or None. It starts at once, on the connection's reader; most (a send, an offset query) finish without
ever waiting and cost no task of their own. One that waits (long polling, a store read in a worker thread) goes on in
a task from its first wait, so it never holds up the connection. Until that first wait a handler runs inside the
reader's task: it must not cancel `asyncio.current_task()` (asyncio.timeout, TaskGroup) before it has awaited
something. Responses are queued and written once per pass of the event loop, all a connection's ready answers in one
write; the reader stops reading while its connection's unsent bytes are above the transport's limit.
Oneway requests (flag bit 1) never get an answer. Unknown codes get REQUEST_CODE_NOT_SUPPORTED with RocketMQ's
remark, a handler's HeaderError or exception SYSTEM_ERROR. Limits: `max_connections` (more are closed at once) and
`max_in_flight` requests over all connections (more get SYSTEM_BUSY "[OVERLOAD]..." as RocketMQ answers when its
executor rejects a task). Connections idle for `idle_timeout_s` (no whole frame read, no answer written: a silent
socket or one that stopped half-way through a frame) are closed, as NettyRemotingServer's IdleStateHandler closes a
channel idle for serverChannelMaxIdleTimeSeconds (120 s); one client address holds at most
`max_connections_per_address` connections (rocketstore's own limit, well below `max_connections`), so no one
address can take every slot. Requests waiting in a handler that parks them (a held pull: `Connection.park()`) do
not count against `max_in_flight`. `before_request(cmd, conn)` may refuse a request (the ACL): the response it returns
is sent instead of the handler's (it must not raise). Responses that clients send to requests of this server (`Connection.request`, e.g. a
broker asking a producer about a transaction) are matched by opaque."""

import asyncio
import itertools
import logging
import time
import types
from collections.abc import Awaitable, Callable

from . import frame
from .codes import ResponseCode, Version
from .command import ONEWAY_FLAG, RESPONSE_FLAG, RemotingCommand, response_to
from .errors import HeaderError, RemotingProtocolError

log = logging.getLogger("rocketstore.remoting")

OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"


def not_supported_remark(code: int) -> str:
    return f" request type {code} not supported"


class Connection:
    """One client connection: its address, a lock-protected writer and the requests it was sent."""

    _ids = itertools.count(1)

    def __init__(self, server: "RemotingServer", reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.id = next(self._ids)
        self.server = server
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.remote = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.host = peer[0] if isinstance(peer, tuple) else str(peer)
        self.last_active = asyncio.get_running_loop().time()  # the last whole frame read or answer written
        self._write_lock = asyncio.Lock()
        self._pending: dict[int, asyncio.Future] = {}
        self._opaques = itertools.count(1)
        self._queued: list[bytes] = []  # frames for the next write (write_soon)
        self._queued_bytes = 0
        self.closed = False

    async def send(self, cmd: RemotingCommand) -> None:
        data = frame.encode(cmd)
        async with self._write_lock:
            if self.closed:
                return
            self.flush()
            self.writer.write(data)
            self.last_active = asyncio.get_running_loop().time()
            await self.writer.drain()

    def write_soon(self, data: bytes) -> None:
        """Queue a frame: the frames queued in one pass of the event loop go out in one write after it (a
        pipelining client's answers share a system call instead of one each)."""
        if self.closed:
            return
        self._queued.append(data)
        self._queued_bytes += len(data)
        if len(self._queued) == 1:
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        queued, self._queued, self._queued_bytes = self._queued, [], 0
        if queued and not self.closed:
            self.writer.write(queued[0] if len(queued) == 1 else b"".join(queued))
            self.last_active = asyncio.get_running_loop().time()

    def park(self) -> "_Parked":
        """`with conn.park():` around a wait that is no work (a held pull): the request leaves the server's
        in-flight count meanwhile, so parked requests never make others SYSTEM_BUSY."""
        return _Parked(self.server)

    def backlog(self) -> int:
        """Bytes answered but not yet sent: queued here and in the transport's buffer."""
        return self._queued_bytes + self.writer.transport.get_write_buffer_size()

    async def drain(self) -> None:
        async with self._write_lock:
            if not self.closed:
                self.flush()
                await self.writer.drain()

    async def request(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send a request to the client and wait for its response."""
        cmd.opaque = next(self._opaques)
        fut = asyncio.get_running_loop().create_future()
        self._pending[cmd.opaque] = fut
        try:
            await self.send(cmd)
            return await asyncio.wait_for(fut, timeout)
        finally:
            self._pending.pop(cmd.opaque, None)

    async def oneway(self, cmd: RemotingCommand) -> None:
        """Send a request that gets no answer. A client gone meanwhile (its connection lost before the server saw
        it close) is a warning, as NettyRemotingAbstract.invokeOnewayImpl's failed write is: nobody waits for it."""
        cmd.opaque = next(self._opaques)
        cmd.flag |= ONEWAY_FLAG
        try:
            await self.send(cmd)
        except ConnectionError as e:
            log.warning("%s: oneway request %d not sent, connection lost (%s)", self.remote, cmd.code, e)

    def on_response(self, cmd: RemotingCommand) -> None:
        fut = self._pending.get(cmd.opaque)
        if fut is not None and not fut.done():
            fut.set_result(cmd)
        else:
            log.debug("%s: response to unknown opaque %d", self.remote, cmd.opaque)

    def fail_pending(self) -> None:
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError("connection closed"))


class _Parked:
    def __init__(self, server: "RemotingServer"):
        self.server = server

    def __enter__(self):
        self.server.in_flight -= 1
        self.server.parked += 1

    def __exit__(self, *exc):
        self.server.parked -= 1
        self.server.in_flight += 1


Handler = Callable[[RemotingCommand, Connection], Awaitable[RemotingCommand | None]]

IDLE_TIMEOUT_S = 120.0  # NettyServerConfig.serverChannelMaxIdleTimeSeconds
READ_CHUNK = 256 * 1024  # the most one read of a connection takes
MAX_CONNECTIONS_PER_ADDRESS = 128


class RemotingServer:
    def __init__(
        self,
        handlers: dict[int, Handler],
        *,
        name: str = "remoting",
        version: int = Version.V5_3_3,
        max_frame: int = frame.DEFAULT_MAX_FRAME,
        max_connections: int = 1024,
        max_in_flight: int = 4096,
        idle_timeout_s: float | None = IDLE_TIMEOUT_S,
        max_connections_per_address: int = MAX_CONNECTIONS_PER_ADDRESS,
        on_close: Callable[[Connection], None] | None = None,
        on_request: Callable[[RemotingCommand, Connection], None] | None = None,
        on_response: Callable[[RemotingCommand, RemotingCommand | None, float], None] | None = None,
        before_request: Callable[[RemotingCommand, Connection], RemotingCommand | None] | None = None,
        fast: dict[int, Callable[[RemotingCommand, Connection], bytes | None]] | None = None,
    ):
        self.handlers = dict(handlers)
        self.name = name
        self.version = version
        self.max_frame = max_frame
        self.max_connections = max_connections
        self.max_in_flight = max_in_flight
        self.idle_timeout_s = idle_timeout_s if idle_timeout_s and idle_timeout_s > 0 else None
        self.max_connections_per_address = max_connections_per_address
        self._per_address: dict[str, int] = {}
        self.parked = 0  # requests parked (held pulls), outside in_flight
        self._sweeper: asyncio.Task | None = None
        self.on_close = on_close
        self.on_request = on_request
        self.on_response = on_response  # (request, response or None, perf_counter() at its start), once answered
        self.before_request = before_request
        # request code -> a call that answers the common request at once (the answer frame; None: the handler
        # answers), on the reader, without a handler's coroutine: the broker's plain sends (broker/fast_send.py).
        # It counts its own metrics; the server never calls it with a before_request (ACL) set.
        self.fast = dict(fast or {})
        self.connections: dict[int, Connection] = {}
        self.in_flight = 0
        self._server: asyncio.AbstractServer | None = None
        self._more_servers: list[asyncio.AbstractServer] = []
        self._tasks: set[asyncio.Task] = set()  # request handlers
        self._readers: set[asyncio.Task] = set()  # one per connection
        self._closing = False

    @property
    def waiting_requests(self) -> int:
        """Requests whose handler is waiting (carried on in a task of its own)."""
        return len(self._tasks)

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        if self.idle_timeout_s is not None and self._sweeper is None:
            self._sweeper = asyncio.ensure_future(self._close_idle())
        return self.port

    async def _close_idle(self) -> None:
        """Every quarter of the idle timeout (5 s at most): connections idle longer than it are closed."""
        loop = asyncio.get_running_loop()
        every = min(self.idle_timeout_s / 4, 5.0)
        while True:
            await asyncio.sleep(every)
            limit = loop.time() - self.idle_timeout_s
            for conn in [c for c in self.connections.values() if c.last_active < limit]:
                log.info("%s: closing %s, idle for %.0f s", self.name, conn.remote, self.idle_timeout_s)
                conn.writer.transport.abort()

    async def listen_also(self, host: str, port: int) -> int:
        """One more address serving the same requests (a broker's fast, "VIP" channel: its port - 2)."""
        server = await asyncio.start_server(self._serve, host, port)
        self._more_servers.append(server)
        return server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self._closing = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self._server is not None:
            self._server.close()
        for server in self._more_servers:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        for conn in list(self.connections.values()):
            conn.writer.close()
        # each reader sees its connection end and cleans up; none is left for the loop to cancel
        await asyncio.gather(*self._readers, *self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        for server in self._more_servers:
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(self, reader, writer)
        if self._closing:
            writer.close()
            return
        if len(self.connections) >= self.max_connections:
            log.warning("%s: %s refused, %d connections already", self.name, conn.remote, len(self.connections))
            writer.close()
            return
        same = self._per_address.get(conn.host, 0)
        if same >= self.max_connections_per_address:
            log.warning("%s: %s refused, %d connections from that address already", self.name, conn.remote, same)
            writer.close()
            return
        self._per_address[conn.host] = same + 1
        self.connections[conn.id] = conn
        me = asyncio.current_task()
        self._readers.add(me)
        try:
            await self._read_loop(conn)
        except RemotingProtocolError as e:
            log.warning("%s: closing %s: %s", self.name, conn.remote, e)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except Exception:  # a bug (in a hook, say) ends this connection only
            log.exception("%s: connection %s failed", self.name, conn.remote)
        finally:
            self._readers.discard(me)
            conn.flush()  # the answers already made go out before the close
            conn.closed = True
            del self.connections[conn.id]
            left = self._per_address[conn.host] - 1
            if left:
                self._per_address[conn.host] = left
            else:
                del self._per_address[conn.host]
            conn.fail_pending()
            writer.close()
            if self.on_close is not None:
                self.on_close(conn)

    async def _read_loop(self, conn: Connection) -> None:
        # the transport's high-water mark: above it the answers are not being read, so neither are more requests
        limit = conn.writer.transport.get_write_buffer_limits()[1]
        loop = asyncio.get_running_loop()
        buf = b""  # read, not yet taken: the start of a frame not yet whole
        while True:
            # what the socket holds, then every whole frame in it: a pipelining client's requests cost one read
            # between them, not two awaits each
            data = await conn.reader.read(READ_CHUNK)
            if not data:
                return  # the client closed (a frame cut short with it is dropped, as NettyDecoder drops it)
            buf = buf + data if buf else data
            while True:
                view, pos, end = memoryview(buf), 0, len(buf)
                while end - pos >= 4:
                    length = frame.frame_length(view[pos : pos + 4], self.max_frame)
                    if end - pos - 4 < length:
                        break
                    cmd = frame.decode(view[pos + 4 : pos + 4 + length])
                    pos += 4 + length
                    conn.last_active = loop.time()
                    waiting = self._take(cmd, conn)
                    if waiting is not None:
                        await waiting
                    if conn.backlog() > limit:
                        await conn.drain()
                if pos:
                    buf = buf[pos:]
                if len(buf) < 4:
                    break
                missing = 4 + frame.frame_length(buf[:4], self.max_frame) - len(buf)
                if missing <= READ_CHUNK:
                    break
                buf += await conn.reader.readexactly(missing)  # a big frame's rest at once, not chunk by chunk

    def _take(self, cmd: RemotingCommand, conn: Connection):
        """One frame read whole: an answer to one of our requests, or a request answered, started or refused.
        What the reader must await (a refusal's write), or None."""
        if cmd.is_response:
            conn.on_response(cmd)
            return None
        if self.on_request is not None:
            self.on_request(cmd, conn)
        if self.in_flight >= self.max_in_flight:
            return None if cmd.is_oneway else conn.send(self._answer(cmd, ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK))
        fast = self.fast.get(cmd.code) if self.before_request is None else None
        if fast is None or not self._answer_fast(fast, cmd, conn):
            self.in_flight += 1
            self._start(self._handle(cmd, conn))
        return None

    def _answer_fast(self, fast, cmd: RemotingCommand, conn: Connection) -> bool:
        """The request answered by its fast call (True), or left to its handler (False). A failure answers
        SYSTEM_ERROR, as a handler's does."""
        try:
            data = fast(cmd, conn)
        except Exception as e:
            log.exception("%s: request %d from %s failed", self.name, cmd.code, conn.remote)
            data = frame.encode(self._answer(cmd, ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}"))
        if data is None:
            return False
        conn.write_soon(data)
        return True

    def _start(self, handling) -> None:
        """Run a request's handling up to its first wait; if it has to wait, a task carries it on from there."""
        try:
            waiting = handling.send(None)
        except StopIteration:
            return  # answered without waiting
        task = asyncio.ensure_future(_resume(handling, waiting))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _answer(self, request: RemotingCommand, code: int, remark: str | None) -> RemotingCommand:
        return response_to(request, code, remark, version=self.version)

    async def _handle(self, cmd: RemotingCommand, conn: Connection) -> None:
        started = time.perf_counter()
        response = None
        try:
            handler = self.handlers.get(cmd.code)
            refusal = None if self.before_request is None else self.before_request(cmd, conn)
            if refusal is not None:
                response = refusal
            elif handler is None:
                log.info("%s: %s sent unsupported request code %d", self.name, conn.remote, cmd.code)
                response = self._answer(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, not_supported_remark(cmd.code))
            else:
                try:
                    response = await handler(cmd, conn)
                except (HeaderError, RemotingProtocolError) as e:  # a header field or a body that does not parse
                    response = self._answer(cmd, ResponseCode.SYSTEM_ERROR, f"RemotingCommandException: {e}")
                except Exception as e:  # a handler's bug answers SYSTEM_ERROR, as RocketMQ's processor wrapper does
                    log.exception("%s: request %d from %s failed", self.name, cmd.code, conn.remote)
                    response = self._answer(cmd, ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
            if response is None or cmd.is_oneway:
                return
            response.opaque = cmd.opaque
            response.flag |= RESPONSE_FLAG
            response.version = self.version
            try:
                data = frame.encode(response)
            except Exception as e:  # an answer that cannot be written (a header over 16 MiB, say)
                log.exception("%s: the answer to request %d from %s failed", self.name, cmd.code, conn.remote)
                data = frame.encode(self._answer(cmd, ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}"))
            conn.write_soon(data)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.in_flight -= 1
            if self.on_response is not None:  # the metrics (remoting/broker/metered.py): never fails a request
                try:
                    self.on_response(cmd, response, started)
                except Exception:
                    log.exception("%s: counting request %d failed", self.name, cmd.code)


@types.coroutine
def _resume(coro, waiting):
    """Drive `coro`, which already ran up to its first wait (it yielded `waiting`, what a task waits on), on to
    its end inside a task: what the task sends or throws in goes on to the coroutine, what it yields out."""
    while True:
        try:
            sent = yield waiting
        except BaseException as e:  # a cancellation thrown in by the task is the coroutine's to handle
            try:
                waiting = coro.throw(e)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            waiting = coro.send(sent)
        except StopIteration as stop:
            return stop.value
