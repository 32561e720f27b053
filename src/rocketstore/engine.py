"""Which engine runs the per-message loops: the compiled extension (rocketstore._native) or pure Python.

The pure Python modules are the reference; the extension must answer exactly as they do (tests/native/).
ROCKETSTORE_PURE=1 forces the pure path. When the extension was not built (no compiler at install time),
the package says so once, with a warning, and runs in pure Python.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path

native = None
"""The extension module, or None when running pure Python."""


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

NAME = "native (C extension)" if native is not None else "pure Python"


def describe() -> str:
    """One line for --version and reports: the engine and, for pure Python, why."""
    return NAME if native is not None else f"{NAME} ({REASON})"
