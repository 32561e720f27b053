"""Which engine runs the per-message loops, the compiled extension (rocketstore._native) or pure Python, and the
one table of their twins.

The pure Python functions are the reference; the extension must answer exactly as they do (tests/native/).
ROCKETSTORE_PURE=1 forces the pure path. When the extension was not built (no compiler at install time),
the package says so once, with a warning, and runs in pure Python.

The engine is chosen here once, and nowhere else:

- TWINS names every function with two engines: its pure reference and its native side (a function of the
  extension, or a Python wrapper over the extension's calls for a twin whose C leaves some inputs to Python).
  A module takes a twin by its public name from here, `from ..engine import parse_properties`, bound once at
  import: the chosen function itself, no call in between. The module of the reference re-exports it under the
  same public name (`formats.properties.parse_properties`), by the same import placed after the reference.
- A fast path with no one-function twin (a whole-run C routine with a Python loop as the fallback) asks
  `engine.native` when it runs: the extension or None. No module but this one binds the extension or one of
  its functions to a name (tests/store/test_engine_table.py reads every module's syntax tree for it).
- using("pure") / using("native") runs a block on one engine: the twins bound in every loaded rocketstore
  module and `engine.native` switch together, and are put back after (tests/native compares the engines so).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

native = None
"""The extension module, or None when running pure Python (inside using("pure") too)."""


SOURCES = Path(__file__).resolve().parents[1] / "native"
"""The extension's C sources in a checkout (src/native/, beside the package; an installed wheel has none)."""


def sources_hash(folder: Path) -> str | None:
    """setup.py's hash of the extension's sources (subfolders included), when they are beside the package (a
    checkout or an editable install; an installed wheel has none): None without them."""
    if not (folder / "module.c").is_file():
        return None
    paths = sorted((p.relative_to(folder).as_posix(), p) for p in folder.rglob("*.[ch]"))
    h = hashlib.sha256()
    for name, p in paths:
        h.update(name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


if os.environ.get("ROCKETSTORE_PURE", "") not in ("", "0"):
    REASON = "ROCKETSTORE_PURE is set"
else:
    try:
        from . import _native as native

        REASON = ""
        built, here = getattr(native, "SOURCE_HASH", ""), sources_hash(SOURCES)
        if built and here is not None and built != here:  # sources changed since the build: its functions may not match
            native = None
            REASON = "the compiled extension was built from other sources than these"
            hint = "rebuild it (`make setup`, or `pip install -e .`)"
    except ImportError as e:  # not built: no compiler or headers when the package was installed
        REASON = f"the compiled extension is not available ({e})"
        hint = "reinstall with a C compiler and Python headers to build it"
    if REASON:
        warnings.warn(f"rocketstore runs in pure Python (slower): {REASON}; {hint}", RuntimeWarning, stacklevel=2)

EXTENSION = native
"""The extension this process loaded (None: pure Python); native is it, but for a using("pure") block."""

NAME = "native (C extension)" if native is not None else "pure Python"


def describe() -> str:
    """One line for --version and reports: the engine and, for pure Python, why."""
    return NAME if native is not None else f"{NAME} ({REASON})"


class Twin(NamedTuple):
    """A function with two engines. `reference` is "module:function", the pure Python reference; `native` is
    the extension's function, or "module:function" for a Python wrapper over the extension's calls."""

    name: str
    reference: str
    native: str


_P = "rocketstore."
TWINS = (
    Twin("java_string_hash", _P + "formats.javahash:java_string_hash_py", "java_string_hash"),
    Twin("parse_properties", _P + "formats.properties:parse_properties_py", "parse_properties"),
    Twin("property_values", _P + "formats.properties:property_values_py", "property_values"),
    Twin("decode_record", _P + "formats.record:decode_record_py", "decode_record"),
    Twin("take_units", _P + "formats.cq:take_units_py", "take_units"),
    Twin("select_chain", _P + "formats.index:select_chain_py", "select_chain"),
    Twin("encode_messages", _P + "formats.inner_batch:encode_messages_py", _P + "formats.inner_batch:encode_messages_native"),
    Twin("decode_messages", _P + "formats.inner_batch:decode_messages_py", _P + "formats.inner_batch:decode_messages_native"),
    Twin("count_messages", _P + "formats.inner_batch:count_messages_py", _P + "formats.inner_batch:count_messages_native"),
    Twin("search_by_time", _P + "log.consume_queue:search_by_time_py", "search_by_time"),
    Twin("props_info", _P + "services.bulk_dispatch:props_info_py", "props_info"),
    Twin("decode_run", _P + "services.bulk_dispatch:decode_run_py", _P + "services.bulk_dispatch:decode_run_native"),
    Twin("get_plain", _P + "read.get_plain:get_plain_py", "get_plain"),
    Twin("batchcq_put", _P + "put.batch_topic:put_py", _P + "put.batch_topic:put_native"),
    Twin("batchcq_put_batch", _P + "put.batch_topic:put_batch_py", _P + "put.batch_topic:put_batch_native"),
    Twin("new_tally", _P + "broker.metrics:new_tally_py", "Counts"),
    Twin("meter_remoting", _P + "remoting.broker.metered:meter_remoting_py", "meter_remoting"),
    Twin("fast_send", _P + "remoting.broker.fast_send:fast_send_py", "fast_send"),
    Twin("from_records", _P + "spark.record_batch:from_records_py", _P + "spark.record_batch:from_records_native"),
)  # fmt: skip
_BY_NAME = {t.name: t for t in TWINS}


def _attr(where: str):
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(module), name)


def reference(name: str):
    """The pure reference of a twin."""
    return _attr(_BY_NAME[name].reference)


def native_side(name: str):
    """The native side of a twin (this process loaded the extension: else RuntimeError)."""
    t = _BY_NAME[name]
    if EXTENSION is None:
        raise RuntimeError(f"{name} has no native side here: {REASON}")
    importlib.import_module(t.reference.partition(":")[0])  # the reference's module readies what its C uses
    return _attr(t.native) if ":" in t.native else getattr(EXTENSION, t.native)


def _side(name: str, pure: bool):
    return reference(name) if pure else native_side(name)


def __getattr__(name: str):
    """A twin, by its public name: the chosen side, resolved at the first import of it (its module is imported
    then, the reference's module first) and kept as this module's attribute."""
    if name not in _BY_NAME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    fn = _side(name, native is None)
    globals()[name] = fn
    return fn


@contextmanager
def using(kind: str):
    """Run a block on one engine, "pure" or "native" (RuntimeError when the extension is not loaded): every
    loaded rocketstore module's name bound to the other engine's side of a twin is rebound (the names defining
    the sides, `*_py` and `*_native`, stay), and `engine.native` (and any name still bound to the extension
    itself) with them; all are put back when the block ends. Modules imported inside the block keep what they
    bound; what an import built once (StoredMessage's field getters) stays. Not for use with other threads
    running the store's code."""
    if kind not in ("pure", "native"):
        raise ValueError(f"engine {kind!r}: 'pure' or 'native'")
    global native
    pure = kind == "pure"
    target = None if pure else EXTENSION
    if not pure and EXTENSION is None:
        raise RuntimeError(f"no native engine: {REASON}")
    here = globals()
    swaps = {}  # id(old) -> (old, new)
    for t in TWINS:
        if t.reference.partition(":")[0] not in sys.modules:
            continue  # nothing bound it yet (resolving it imports it)
        new = _side(t.name, pure)
        old = here.get(t.name)
        for o in (old, _side(t.name, not pure) if EXTENSION is not None else None):
            if o is not None and o is not new:
                swaps[id(o)] = (o, new)
    if EXTENSION is not None and native is not target:
        swaps[id(EXTENSION)] = (EXTENSION, target)  # a name bound to the extension itself
    keep = {tuple(w.split(":")) for t in TWINS for w in (t.reference, t.native) if ":" in w}
    keep |= {(__name__, "EXTENSION"), (__name__, "native")}
    changed = [(here, "native", native)]
    native = target
    for mname, module in list(sys.modules.items()):
        if module is None or module is EXTENSION or not (mname == "rocketstore" or mname.startswith(_P)):
            continue
        names = vars(module)
        for key, value in list(names.items()):
            swap = swaps.get(id(value)) if value is not None else None
            if swap is not None and swap[0] is value and (mname, key) not in keep:
                names[key] = swap[1]
                changed.append((names, key, value))
    try:
        yield
    finally:
        for names, key, value in reversed(changed):
            names[key] = value
