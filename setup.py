"""The compiled hot paths (rocketstore._native), built by `pip install`.

The extension is optional: without a C compiler or Python headers the build warns and the package installs
and runs in pure Python (rocketstore.engine says which engine is in use).
"""

import hashlib
import os
from glob import glob

from setuptools import Extension, setup

NATIVE = "src/native"  # the C sources: outside the package, so never imported in place of the extension


def _sources(folder: str, pattern: str) -> list[str]:
    """The files matching pattern under folder, as '/'-separated paths relative to it."""
    paths = glob(os.path.join(folder, "**", pattern), recursive=True)
    return [os.path.relpath(p, folder).replace(os.sep, "/") for p in paths]


def sources_hash(folder: str) -> str:
    """sha256 over the extension's .c and .h files, subfolders included (path under the folder and bytes, by
    path): built into the module as SOURCE_HASH, so that rocketstore.engine can tell a module built from other
    sources (a checkout updated without a rebuild) and run pure Python instead of failing on a missing
    function. engine.py computes the same."""
    h = hashlib.sha256()
    for name in sorted(_sources(folder, "*.[ch]")):
        with open(os.path.join(folder, name), "rb") as f:
            h.update(name.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


setup(
    ext_modules=[
        Extension(
            "rocketstore._native",
            sources=[f"{NATIVE}/{name}" for name in sorted(_sources(NATIVE, "*.c"))],
            depends=[f"{NATIVE}/{name}" for name in sorted(_sources(NATIVE, "*.h"))],
            include_dirs=[NATIVE],
            define_macros=[("RS_SOURCE_HASH", f'"{sources_hash(NATIVE)}"')],
            libraries=["z"],  # zlib's crc32 (the CRC the zlib module computes)
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fno-strict-aliasing"],
            optional=True,
        )
    ]
)
