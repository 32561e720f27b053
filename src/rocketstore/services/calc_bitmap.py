"""The bitmap dispatcher (the broker's CommitLogDispatcherCalcBitMap): for every dispatched record of a topic
with registered SQL92 filters, evaluate each filter on the record's properties and set the filter's bloom
bits when it matches; the map goes into request.bit_map, which the ConsumeQueue dispatcher writes into the
record's ConsumeQueue ext unit. Added in front of the other dispatchers (addFirst), as the broker does.
"""
from __future__ import annotations

import logging

from ..formats import properties as P

log = logging.getLogger("rocketstore.filter")


class CalcBitMapDispatcher:
    def __init__(self, manager):
        self.manager = manager

    def dispatch(self, req) -> None:
        filters = self.manager.get(req.topic)
        if not filters:
            return
        props = req.properties
        if isinstance(props, (bytes, bytearray, memoryview)):
            props = P.parse_properties(bytes(props))
        props = props or {}
        bloom = self.manager.bloom
        bits = bloom.new_bits()
        for data in filters:
            if data.compiled is None:
                continue
            try:
                hit = data.compiled.matches(props)
            except Exception:       # a filter that fails on one message must not stop dispatch
                log.exception("bitmap: filter of %s on %s failed at offset %d", data.consumer_group, req.topic,
                              req.commit_log_offset)
                continue
            if hit:
                bloom.hash_to(data.bloom, bits)
        req.bit_map = bytes(bits)
