"""Which engine runs the per-message loops: the compiled extension (rocketstore._native) or pure Python.

The pure Python modules are the reference; the extension must answer exactly as they do (tests/native/).
ROCKETSTORE_PURE=1 forces the pure path. When the extension was not built (no compiler at install time),
the package says so once, with a warning, and runs in pure Python.
"""

from __future__ import annotations

import os
import warnings

native = None
"""The extension module, or None when running pure Python."""

if os.environ.get("ROCKETSTORE_PURE", "") not in ("", "0"):
    REASON = "ROCKETSTORE_PURE is set"
else:
    try:
        from . import _native as native

        REASON = ""
    except ImportError as e:  # not built: no compiler or headers when the package was installed
        REASON = f"the compiled extension is not available ({e})"
        warnings.warn(
            f"rocketstore runs in pure Python (slower): {REASON}; reinstall with a C compiler "
            "and Python headers to build it",
            RuntimeWarning,
            stacklevel=2,
        )

NAME = "native (C extension)" if native is not None else "pure Python"


def describe() -> str:
    """One line for --version and reports: the engine and, for pure Python, why."""
    return NAME if native is not None else f"{NAME} ({REASON})"
