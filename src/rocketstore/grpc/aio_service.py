"""MessagingService on grpc.aio: streams and long polls are coroutines, so they cost no thread.

The synchronous MessagingService (service.py) does the work. Here:
- unary calls run it on the unary thread pool (grpcThreadPoolNums threads); more than grpcThreadPoolQueueCapacity
  calls waiting for a thread are answered TOO_MANY_REQUESTS "flow limit", as the proxy answers a full pool;
- a Telemetry stream is a coroutine reading the client's commands and writing its outbox (transaction checks
  from other threads arrive through call_soon_threadsafe); beyond maxTelemetryStreams open streams a new one
  ends at once with gRPC status RESOURCE_EXHAUSTED and a message;
- a ReceiveMessage long poll is a coroutine that tries a pop on its own small thread pool
  (longPollingThreadPoolNums), then sleeps until a message is stored in its topic or the group's retry topic,
  the group's pop state changes (an ack, a changed invisible time), an in-flight message becomes visible
  again, or the polling time ends; beyond maxPopPollingSize polls a new one is answered TOO_MANY_REQUESTS
  "polling full", as the broker's PopLongPollingService answers.
So neither streams nor polls can starve QueryRoute, SendMessage and the other unary calls of threads.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc

from ..broker.pop import now_ms
from ..config.store_config import ASYNC_FLUSH
from .protocol import definition_pb2 as pb
from .protocol import service_pb2 as spb
from .protocol import service_pb2_grpc as sgrpc
from .request_log import RequestLog
from .retry import retry_topic

log = logging.getLogger("rocketstore.serve")
Code = pb.Code
_METHODS = spb.DESCRIPTOR.services_by_name["MessagingService"].methods_by_name


class CallContext:
    """What the synchronous handlers read of a call, taken on the event loop (an aio context is the loop's)."""

    def __init__(self, context):
        self._metadata = tuple(context.invocation_metadata() or ())
        self._peer = context.peer()
        remaining = context.time_remaining()
        self._deadline = None if remaining is None else time.monotonic() + remaining

    def invocation_metadata(self):
        return self._metadata

    def peer(self):
        return self._peer

    def time_remaining(self):
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())


class LoopOutbox:
    """A Telemetry stream's outbox: put() from any thread, read by the stream's coroutine."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.queue: asyncio.Queue = asyncio.Queue()

    def put(self, item) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: the server has stopped
            pass


class Wakeups:
    """Long polls wait here. A poll registers interests ("m", topic) for messages stored in a topic and
    ("s", group, topic) for changes of a group's pop state; notify() (from any thread) wakes the polls with
    one of the interests. Notifications are gathered and delivered to the loop in one callback."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._waiters: dict[tuple, set[asyncio.Event]] = {}
        self._pending: set[tuple] = set()
        self._lock = threading.Lock()

    def notify(self, keys) -> None:
        with self._lock:
            scheduled = bool(self._pending)
            self._pending.update(keys)
        if not scheduled:
            try:
                self.loop.call_soon_threadsafe(self._deliver)
            except RuntimeError:
                pass

    def _deliver(self) -> None:
        with self._lock:
            keys, self._pending = self._pending, set()
        for k in keys:
            for event in self._waiters.get(k, ()):
                event.set()

    def register(self, keys) -> asyncio.Event:
        event = asyncio.Event()
        for k in keys:
            self._waiters.setdefault(k, set()).add(event)
        return event

    def unregister(self, keys, event: asyncio.Event) -> None:
        for k in keys:
            waiters = self._waiters.get(k)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[k]

    def wake_all(self) -> None:
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()


class AsyncMessagingService(sgrpc.MessagingServiceServicer):
    def __init__(self, core, loop: asyncio.AbstractEventLoop, requests: RequestLog | None = None):
        self.core = core
        self.requests = requests or RequestLog()  # the request log (request_log.py), at INFO
        self.config = core.config
        self.loop = loop
        self.unary_pool = ThreadPoolExecutor(self.config.grpc_threads, thread_name_prefix="grpc")
        self.poll_pool = ThreadPoolExecutor(self.config.long_polling_threads, thread_name_prefix="long-poll")
        self.waiting_unary = 0  # unary calls running or waiting for a thread
        self.streams = 0  # open Telemetry streams
        self.polls = 0  # ReceiveMessage calls polling
        self.wakeups = Wakeups(loop)
        self.meter = None  # metered.GrpcMeter: each call counted (rocketmq_rpc_latency, messages in / out), or None
        self.inline = inline_calls(core.store.config.flush_disk_type)
        core.store.add_dispatcher(lambda req: self.wakeups.notify((("m", req.topic),)))
        core.pop.on_change = lambda touched: self.wakeups.notify([("s", g, t) for g, t in touched])

    def stop(self) -> None:
        """From any thread: the polls end now (the core's stopping event is set first)."""
        try:
            self.loop.call_soon_threadsafe(self.wakeups.wake_all)
        except RuntimeError:
            pass

    def close(self) -> None:
        self.unary_pool.shutdown(wait=True)
        self.poll_pool.shutdown(wait=True)

    # ------------------------------------------------------------------ unary calls
    async def _unary(self, name: str, request, context):
        started = time.perf_counter()
        response_class = getattr(spb, _METHODS[name].output_type.name)
        if name in self.inline:
            response = _call(getattr(self.core, name), request, CallContext(context), response_class, name)
        elif self.waiting_unary >= self.config.grpc_threads + self.config.grpc_queue_capacity:
            response = response_class(status=pb.Status(code=Code.TOO_MANY_REQUESTS, message="flow limit"))
        else:
            self.waiting_unary += 1
            try:
                response = await self.loop.run_in_executor(
                    self.unary_pool,
                    functools.partial(
                        _call, getattr(self.core, name), request, CallContext(context), response_class, name
                    ),
                )
            finally:
                self.waiting_unary -= 1
        self._log(context, name, response.status.code)
        if self.meter is not None:
            self.meter.answered(name, request, (response,), started)
        return response

    def _log(self, context, kind: str, code: int | None) -> None:
        if self.requests.enabled():
            self.requests.record(context.invocation_metadata(), context.peer(), kind, code)

    def _unary_method(name):
        async def method(self, request, context):
            return await self._unary(name, request, context)

        method.__name__ = name
        return method

    QueryRoute = _unary_method("QueryRoute")
    Heartbeat = _unary_method("Heartbeat")
    SendMessage = _unary_method("SendMessage")
    QueryAssignment = _unary_method("QueryAssignment")
    AckMessage = _unary_method("AckMessage")
    ForwardMessageToDeadLetterQueue = _unary_method("ForwardMessageToDeadLetterQueue")
    UpdateOffset = _unary_method("UpdateOffset")
    GetOffset = _unary_method("GetOffset")
    QueryOffset = _unary_method("QueryOffset")
    EndTransaction = _unary_method("EndTransaction")
    NotifyClientTermination = _unary_method("NotifyClientTermination")
    ChangeInvisibleDuration = _unary_method("ChangeInvisibleDuration")
    RecallMessage = _unary_method("RecallMessage")
    SyncLiteSubscription = _unary_method("SyncLiteSubscription")
    del _unary_method

    async def PullMessage(self, request, context):
        self._log(context, "PullMessage", Code.NOT_IMPLEMENTED)
        yield spb.PullMessageResponse(
            status=pb.Status(
                code=Code.NOT_IMPLEMENTED, message="PullMessage is not implemented by rocketstore serve yet"
            )
        )

    # ------------------------------------------------------------------ long polls
    async def ReceiveMessage(self, request, context):
        core = self.core
        started = time.perf_counter()
        if self.polls >= self.config.max_long_polls:
            for response in core.receive_finish(
                Code.TOO_MANY_REQUESTS, f"polling full: {self.polls} receive calls are polling (maxPopPollingSize)"
            ):
                yield response
            self._log(context, "ReceiveMessage", Code.TOO_MANY_REQUESTS)
            return
        self.polls += 1  # from arrival on: the place is taken while the request is checked
        try:
            responses = await self._long_poll(request, context)
        finally:
            self.polls -= 1
        self._log(context, "ReceiveMessage", responses[0].status.code)
        if self.meter is not None:
            self.meter.answered("ReceiveMessage", request, responses, started)
        for response in responses:
            yield response

    async def _long_poll(self, request, context) -> list:
        core = self.core
        plan = await self._run(self.unary_pool, core.receive_plan, request, CallContext(context))
        if isinstance(plan, list):  # refused
            return plan
        retry = retry_topic(plan.group, plan.topic)
        keys = [("m", plan.topic), ("m", retry), ("s", plan.group, plan.topic), ("s", plan.group, retry)]
        event = self.wakeups.register(keys)
        try:
            deadline = self.loop.time() + plan.polling_ms / 1000.0
            while True:
                event.clear()  # a change from here on makes the next wait return at once
                responses, due = await self._run(self.poll_pool, core.receive_attempt, plan)
                if responses is not None:
                    return responses
                left = deadline - self.loop.time()
                if left <= 0 or core.stopping.is_set():
                    return core.receive_finish(Code.MESSAGE_NOT_FOUND, "no new message")
                if due is not None:
                    left = min(left, max(0.0, (due - now_ms()) / 1000.0) + 0.01)
                try:
                    await asyncio.wait_for(event.wait(), left)
                except asyncio.TimeoutError:
                    pass
        finally:
            self.wakeups.unregister(keys, event)

    async def _run(self, pool, fn, *args):
        return await self.loop.run_in_executor(pool, functools.partial(fn, *args))

    # ------------------------------------------------------------------ telemetry
    async def Telemetry(self, request_iterator, context):
        if self.streams >= self.config.max_telemetry_streams:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"too many Telemetry streams: {self.streams} open (maxTelemetryStreams)",
            )
        self.streams += 1
        self._log(context, "Telemetry", None)
        reader = None
        try:
            core = self.core
            client = core.client_of(CallContext(context))
            outbox = LoopOutbox(self.loop)
            if client is not None:
                client.outbox = outbox  # server-initiated commands (transaction checks) go to the newest stream
            reader = asyncio.ensure_future(self._read_commands(request_iterator, client, outbox))
            while True:
                item = await outbox.queue.get()
                if item is None:
                    if reader.done() or core.stopping.is_set():
                        break
                    continue
                yield item
        finally:
            self.streams -= 1
            if reader is not None:
                reader.cancel()

    async def _read_commands(self, request_iterator, client, outbox: LoopOutbox) -> None:
        try:
            async for cmd in request_iterator:
                answer = await self._run(self.unary_pool, self.core.telemetry_command, client, cmd)
                if answer is not None:
                    outbox.queue.put_nowait(answer)
        except asyncio.CancelledError:
            raise
        except Exception:  # the client went away
            pass
        finally:
            outbox.queue.put_nowait(None)


# Unary calls answered on the event loop itself: they do not wait on the disk (but for a topic's auto-create,
# once, as the remoting side's sends do on the loop too), so handing them to a pool thread only adds two thread
# switches and a GIL hand-over per call (bench/README.md, 2026-11-28 evening). A send waits for its flush with
# SYNC_FLUSH only; acks and invisible-time changes sync the pop journal, and the rarer calls keep the pool too.
NEVER_WAIT = frozenset({"QueryRoute", "Heartbeat", "QueryAssignment", "GetOffset", "QueryOffset"})


def inline_calls(flush_disk_type: str) -> frozenset:
    return NEVER_WAIT | {"SendMessage"} if flush_disk_type == ASYNC_FLUSH else NEVER_WAIT


def _call(fn, request, context, response_class, name):
    """A unary handler on a pool thread: an error is answered in the response's status, never as OK."""
    try:
        return fn(request, context)
    except Exception as e:
        log.exception("%s failed", name)
        return response_class(status=pb.Status(code=Code.INTERNAL_SERVER_ERROR, message=f"{name} failed: {e}"))
