"""The put path's compiled engine (rocketstore._native), or None: the one switch every put module reads.

The modules of put/ read `compiled.native` when they run, not when they are imported, so setting it to None
runs the pure code alone (the reference: the tests compare both engines in one process)."""

from __future__ import annotations

from .. import engine

native = engine.native


def lane_engine():
    """The compiled module when it has the put lane (lane.c), else None."""
    return native if native is not None and hasattr(native, "PutLane") else None
