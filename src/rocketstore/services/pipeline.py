"""The dispatch pipeline: the one way a CommitLog record reaches the ConsumeQueues, the index and any other
dispatcher (RocketMQ's DefaultMessageStore.dispatcherList and doDispatch).

Two decoders feed it: the careful one (services.dispatch.check_record: one record as a DispatchRequest,
for anything unusual) and the bulk one (services.bulk_dispatch.decode_run: a run of plain records as
DispatchColumns). Every dispatcher has `dispatch(request)` and `dispatch_columns(columns)`; a dispatcher
without its own dispatch_columns gets one that loops over the run's requests. The put path, reput,
recovery and the local rebuild all dispatch through here; the put path through `put` and `put_batch`,
which skip building a request when no dispatcher needs one.

Whether runs may be dispatched as columns is decided when a dispatcher is added: a dispatcher added in
front (addFirst) may change the request for the ones after it (the bitmap dispatcher sets bit_map), so
it must say `bulk_capable = True` (its dispatch_columns writes what it changes into the columns);
dispatchers added after the built-in ones always can (nothing after them reads what they do).
"""

from __future__ import annotations

import logging


from .dispatch import DispatchRequest
from ..engine import parse_properties

log = logging.getLogger("rocketstore")


class DispatchColumns:
    """A run of decoded records, one list per field, row i being the i-th record in CommitLog order.
    `by_queue`: the rows that get a queue unit, by (topic, queue id), in order (dispatch_rows.unit_rows).
    `bit_map`: None, or a filter bitmap (or None) per row, as request.bit_map."""

    __slots__ = (
        "topic",
        "queue_id",
        "queue_offset",
        "phys",
        "size",
        "store_ts",
        "sys_flag",
        "tags_code",
        "keys",
        "uniq",
        "props",
        "by_queue",
        "bit_map",
        "_requests",
    )

    def __init__(
        self, topic, queue_id, queue_offset, phys, size, store_ts, sys_flag, tags_code, keys, uniq, props, by_queue
    ):
        self.topic = topic
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.phys = phys
        self.size = size
        self.store_ts = store_ts
        self.sys_flag = sys_flag
        self.tags_code = tags_code
        self.keys = keys
        self.uniq = uniq
        self.props = props  # raw properties bytes
        self.by_queue = by_queue
        self.bit_map = None
        self._requests = None

    @property
    def count(self) -> int:
        return len(self.phys)

    def requests(self) -> list[DispatchRequest]:
        """The run as DispatchRequests, as check_record would make them (made once, shared by the
        dispatchers that loop over them)."""
        if self._requests is None:
            bit_map = self.bit_map
            out = []
            for i in range(len(self.phys)):
                raw = self.props[i]
                req = DispatchRequest(
                    self.topic[i],
                    self.queue_id[i],
                    self.phys[i],
                    self.size[i],
                    self.tags_code[i],
                    self.store_ts[i],
                    self.queue_offset[i],
                    self.keys[i],
                    self.uniq[i],
                    self.sys_flag[i],
                    0,
                    parse_properties(raw) if raw else {},
                )
                if bit_map is not None:
                    req.bit_map = bit_map[i]
                out.append(req)
            self._requests = out
        return self._requests


class _Callable:
    """A plain function added as a dispatcher."""

    def __init__(self, fn):
        self.fn = fn

    def dispatch(self, req):
        self.fn(req)


def _loop_columns(dispatcher):
    """The default dispatch_columns: the dispatcher's dispatch for each request of the run."""

    def dispatch_columns(cols: DispatchColumns) -> None:
        dispatch = dispatcher.dispatch
        for req in cols.requests():
            dispatch(req)

    return dispatch_columns


class DispatchPipeline:
    """The ordered dispatchers: the ConsumeQueue dispatcher, then the index dispatcher (when the index is
    on); others added in front (add(d, first=True)) or after. Also the dispatch-error state of a full disk
    (RocketMQ's WRITE_LOGICS_QUEUE_ERROR / WRITE_INDEX_FILE_ERROR): see failed() and caught_up()."""

    def __init__(self, queues, index_service, index_on: bool = True, notify=None, name: str = ""):
        self.queues = queues  # the ConsumeQueue dispatcher (services.cq_dispatch)
        self.index_service = index_service
        from .index_service import IndexDispatcher  # (index_service reads properties with bulk_dispatch's cache)

        index = IndexDispatcher(index_service) if index_on else None
        self.index = index  # the index dispatcher, None with the index off
        self.name = name  # the store's directory, for the log
        self.dispatchers: list = [queues] + ([index] if index is not None else [])
        self._columns: list = [d.dispatch_columns for d in self.dispatchers]
        self._front: list = []  # dispatchers before the ConsumeQueue dispatcher
        self._back: list = []  # dispatchers after the built-in ones
        self.plain = True  # the built-in dispatchers alone (the put lane, lane.c, runs only then)
        self.bulk = True  # runs may be dispatched as columns (decided in add)
        self.error: OSError | None = None
        self.notify = notify  # called after records were dispatched (wakes long polls)
        self.reput = None  # the ReputService: the put path moves its offset past what it dispatched

    # ---------------------------------------------------------------- dispatchers
    def add(self, dispatcher, first: bool = False) -> None:
        """Add a dispatcher (an object with dispatch(request), or a callable); with first=True it runs
        before the others (RocketMQ's dispatcherList.addFirst)."""
        d = dispatcher if hasattr(dispatcher, "dispatch") else _Callable(dispatcher)
        if first:
            self.dispatchers.insert(0, d)
            self._front.insert(0, d)
            if not getattr(d, "bulk_capable", False):
                self.bulk = False  # what it changes in a request could not reach the columns
        else:
            self.dispatchers.append(d)
            self._back.append(d)
        self._columns = [getattr(x, "dispatch_columns", None) or _loop_columns(x) for x in self.dispatchers]
        self.plain = not self._front and not self._back

    # ---------------------------------------------------------------- reput, recovery, rebuild
    def dispatch(self, req: DispatchRequest) -> None:
        """One record, decoded the careful way, through every dispatcher in order."""
        for d in self.dispatchers:
            d.dispatch(req)
        if self.notify is not None:
            self.notify()

    def dispatch_columns(self, cols: DispatchColumns) -> None:
        """A run of records from the bulk decoder, through every dispatcher in order (callers check
        `bulk` first)."""
        for dispatch_columns in self._columns:
            dispatch_columns(cols)

    # ---------------------------------------------------------------- the put path
    def put(
        self,
        topic,
        queue_id,
        phys,
        size,
        tags_code,
        store_ts,
        queue_offset,
        sys_flag,
        props,
        end,
        batch_size=1,
        info=None,
    ) -> None:
        """The put path's dispatch of the record it just wrote, without decoding it again: a request is made
        only when a dispatcher other than the built-in ones is there. `info`: the props_info of `props`
        when the put path has it (None: read from `props`).

        A queue or index file that cannot be written (a full disk) leaves the record to reput, which retries
        from it (failed()); until reput has caught up the put path dispatches nothing."""
        if self.error is not None:
            return
        try:
            if self._front:
                self._put_request(
                    topic, queue_id, phys, size, tags_code, store_ts, queue_offset, sys_flag, props, batch_size
                )
            else:
                self.queues.put(topic, queue_id, phys, size, tags_code, store_ts, queue_offset, sys_flag, batch_size)
                if self.index is not None:
                    self.index.put(topic, phys, store_ts, sys_flag, props, info)
                if self._back:
                    self._put_back(topic, queue_id, phys, size, tags_code, store_ts, queue_offset, sys_flag, props)
        except OSError as e:
            self.failed(e)
            return
        reput = self.reput
        if end > reput.reput_from_offset:
            reput.reput_from_offset = end
        if self.notify is not None:
            self.notify()

    def put_batch(
        self, topic, queue_id, offsets, sizes, tags_codes, store_ts, base, sys_flag, props_list, end, infos=None
    ) -> None:
        """A producer batch's dispatch (offsets, sizes, tags codes as numpy arrays): its units in one write
        per ConsumeQueue file, then the rest. A file that cannot be written leaves it to reput (put).
        `infos`: the props_info of each record's properties when the put path has them."""
        if self.error is not None:
            return
        try:
            if self._front:  # every record as a DispatchRequest through the whole list
                for i, (p, size, code, props) in enumerate(
                    zip(offsets.tolist(), sizes.tolist(), tags_codes.tolist(), props_list)
                ):
                    self._put_request(topic, queue_id, p, size, code, store_ts, base + i, sys_flag, props)
            else:
                self.queues.put_batch(topic, queue_id, offsets, sizes, tags_codes, store_ts, base)
                if self.index is not None:
                    self.index.put_batch(topic, offsets, store_ts, sys_flag, props_list, infos)
                if self._back:
                    for i, (p, size, code, props) in enumerate(
                        zip(offsets.tolist(), sizes.tolist(), tags_codes.tolist(), props_list)
                    ):
                        self._put_back(topic, queue_id, p, size, code, store_ts, base + i, sys_flag, props)
        except OSError as e:
            self.failed(e)
            return
        self.reput.advance_to(end)
        if self.notify is not None:
            self.notify()

    def _put_request(
        self, topic, queue_id, phys, size, tags_code, store_ts, queue_offset, sys_flag, props, batch_size=1
    ) -> None:
        """A record through the whole list as a DispatchRequest, as reput would dispatch it."""
        req = _request(topic, queue_id, phys, size, tags_code, store_ts, queue_offset, sys_flag, props, batch_size)
        for d in self.dispatchers:
            d.dispatch(req)

    def _put_back(self, topic, queue_id, phys, size, tags_code, store_ts, queue_offset, sys_flag, props) -> None:
        req = _request(topic, queue_id, phys, size, tags_code, store_ts, queue_offset, sys_flag, props)
        for d in self._back:
            d.dispatch(req)

    # ---------------------------------------------------------------- a full disk
    def failed(self, error: OSError) -> None:
        """A ConsumeQueue or index file could not be written (created, on a full disk): the CommitLog holds
        the record; puts answer SERVICE_NOT_AVAILABLE (RocketMQ's isWriteable) and the put path dispatches
        nothing, while reput retries from the first record not dispatched (and the index from its first
        entry not placed). RocketMQ keeps the flag until a restart; here it clears once reput has caught
        up (caught_up), so freeing space is enough."""
        if self.error is None:
            log.error(
                "%s: %s; puts are refused until the queues and index catch up with the CommitLog", self.name, error
            )
        self.error = error

    def caught_up(self) -> None:
        """Reput reached the CommitLog's end and the index placed everything (called under the put lock)."""
        if self.error is not None and self.index_service.error is None:
            log.info("%s: the queues and index caught up with the CommitLog: puts are accepted again", self.name)
            self.error = None


def _request(topic, queue_id, phys, size, tags_code, store_ts, queue_offset, sys_flag, props, batch_size=1):
    """The DispatchRequest of a record the put path wrote (its properties parsed as reput would)."""
    pmap = parse_properties(props) if props else {}
    return DispatchRequest(
        topic,
        queue_id,
        phys,
        size,
        tags_code,
        store_ts,
        queue_offset,
        pmap.get("KEYS") or "",
        pmap.get("UNIQ_KEY"),
        sys_flag,
        0,
        pmap,
        batch_size=batch_size,
    )
