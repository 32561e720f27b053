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
    # its dispatch_columns fills columns.bit_map, which the ConsumeQueue dispatcher writes: reput and
    # recovery keep dispatching runs of records with bitmaps on
    bulk_capable = True

    def __init__(self, manager):
        self.manager = manager

    def dispatch(self, req) -> None:
        filters = self.manager.get(req.topic)
        if not filters:
            return
        props = req.properties
        if isinstance(props, (bytes, bytearray, memoryview)):
            props = P.parse_properties(bytes(props))
        req.bit_map = self._bits(filters, props or {}, req.topic, req.commit_log_offset)

    def dispatch_columns(self, cols) -> None:
        """The bitmaps of a run's records whose topics have filters, into cols.bit_map (None: no bitmap)."""
        bit_maps = None
        filters_of: dict[str, list] = {}
        # a record's bits are the OR of its matching filters' bloom positions: one bytes per set of hits
        bits_of: dict[tuple, bytes] = {}
        topics, raws, phys = cols.topic, cols.props, cols.phys
        for i in range(len(phys)):
            topic = topics[i]
            filters = filters_of.get(topic)
            if filters is None:
                filters = filters_of[topic] = self.manager.get(topic)
            if not filters:
                continue
            if bit_maps is None:
                bit_maps = cols.bit_map if cols.bit_map is not None else [None] * len(phys)
            raw = raws[i]
            hits = self._hits(filters, P.parse_properties(raw) if raw else {}, topic, phys[i])
            bits = bits_of.get((topic, hits))
            if bits is None:
                bits = bits_of[(topic, hits)] = self._bits_of(filters, hits)
            bit_maps[i] = bits
        if bit_maps is not None:
            cols.bit_map = bit_maps

    def _bits(self, filters, props: dict, topic: str, offset: int) -> bytes:
        """The bloom bits of every filter that matches the record's properties."""
        return self._bits_of(filters, self._hits(filters, props, topic, offset))

    def _hits(self, filters, props: dict, topic: str, offset: int) -> tuple:
        """The positions in `filters` of those that match the record's properties."""
        hits = []
        for k, data in enumerate(filters):
            if data.compiled is None:
                continue
            try:
                hit = data.compiled.matches(props)
            except Exception:  # a filter that fails on one message must not stop dispatch
                log.exception("bitmap: filter of %s on %s failed at offset %d", data.consumer_group, topic, offset)
                continue
            if hit:
                hits.append(k)
        return tuple(hits)

    def _bits_of(self, filters, hits: tuple) -> bytes:
        bloom = self.manager.bloom
        bits = bloom.new_bits()
        for k in hits:
            bloom.hash_to(filters[k].bloom, bits)
        return bytes(bits)
