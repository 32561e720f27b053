"""The bitmap dispatcher (the broker's CommitLogDispatcherCalcBitMap): for every dispatched record of a topic
with registered SQL92 filters, evaluate each filter on the record's properties and set the filter's bloom
bits when it matches; the map goes into request.bit_map, which the ConsumeQueue dispatcher writes into the
record's ConsumeQueue ext unit. Added in front of the other dispatchers (addFirst), as the broker does.
"""

from __future__ import annotations

import logging

from ..formats import properties as P
from ..engine import parse_properties, property_values

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
            props = parse_properties(bytes(props))
        req.bit_map = self._bits(filters, props or {}, req.topic, req.commit_log_offset)

    def dispatch_columns(self, cols) -> None:
        """The bitmaps of a run's records whose topics have filters, into cols.bit_map (None: no bitmap)."""
        topics, raws, phys = cols.topic, cols.props, cols.phys
        n = len(phys)
        if n == 0:
            return
        first = topics[0]
        if topics.count(first) == n:  # the usual run: one topic
            groups = {first: None}
        else:
            groups = {}
            for i, topic in enumerate(topics):
                groups.setdefault(topic, []).append(i)
        bit_maps = None
        for topic, members in groups.items():
            filters = self.manager.get(topic)
            if not filters:
                continue
            if members is None:
                bits = self._run_bits(filters, topic, raws, phys)
                if cols.bit_map is None:
                    bit_maps = bits
                    continue
                members = range(n)
            else:
                bits = self._run_bits(filters, topic, [raws[i] for i in members], [phys[i] for i in members])
            if bit_maps is None:
                bit_maps = cols.bit_map if cols.bit_map is not None else [None] * n
            for i, b in zip(members, bits):
                bit_maps[i] = b
        if bit_maps is not None:
            cols.bit_map = bit_maps

    def _run_bits(self, filters, topic: str, raws, offsets) -> list:
        """The bitmaps of a run of one topic's records (raw properties, CommitLog offsets for the log lines).

        A compiled filter reads nothing but the properties it names, so the run's values of those names are
        gathered at once (property_values, the same values parse_properties gives) and the filters are
        evaluated once per distinct combination of them; every record gets its combination's bitmap. A filter
        that fails on a combination fails on each record holding it: a log line per record, as one by one."""
        live = [(k, d.compiled) for k, d in enumerate(filters) if d.compiled is not None]
        names = set()
        for _, compiled in live:
            used = getattr(compiled, "property_names", None)
            if used is None:  # not a sql92.Filter: what it reads is unknown, so record by record
                return self._record_bits(filters, topic, raws, offsets)
            names |= used
        names = sorted(names)
        if len(names) > P.MAX_PROPERTY_VALUES:
            return self._record_bits(filters, topic, raws, offsets)
        values = property_values(raws, names)
        bits_of: dict[tuple, bytes] = {}  # one bytes per set of hits
        outcome: dict[tuple, bytes] = {}
        failures: dict[tuple, list] = {}
        for combo in dict.fromkeys(values):
            props = {name: v for name, v in zip(names, combo) if v is not None}
            hits = []
            for k, compiled in live:
                try:
                    hit = compiled.matches(props)
                except Exception as e:  # a filter that fails on one message must not stop dispatch
                    failures.setdefault(combo, []).append((k, e))
                    continue
                if hit:
                    hits.append(k)
            hits = tuple(hits)
            bits = bits_of.get(hits)
            if bits is None:
                bits = bits_of[hits] = self._bits_of(filters, hits)
            outcome[combo] = bits
        if failures:
            for i, combo in enumerate(values):
                for k, e in failures.get(combo, ()):
                    log.error(
                        "bitmap: filter of %s on %s failed at offset %d",
                        filters[k].consumer_group,
                        topic,
                        offsets[i],
                        exc_info=e,
                    )
        return [outcome[combo] for combo in values]

    def _record_bits(self, filters, topic: str, raws, offsets) -> list:
        """_run_bits record by record: each record's properties parsed and every filter evaluated on them."""
        bits_of: dict[tuple, bytes] = {}
        out = []
        for raw, offset in zip(raws, offsets):
            hits = self._hits(filters, parse_properties(raw) if raw else {}, topic, offset)
            bits = bits_of.get(hits)
            if bits is None:
                bits = bits_of[hits] = self._bits_of(filters, hits)
            out.append(bits)
        return out

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
