"""The compiled hot paths (rocketstore._native), built by `pip install`.

The extension is optional: without a C compiler or Python headers the build warns and the package installs
and runs in pure Python (rocketstore.engine says which engine is in use).
"""

import hashlib
import os
from glob import glob

from setuptools import Extension, setup

NATIVE = "src/rocketstore/_native"


def sources_hash(folder: str) -> str:
    """sha256 over the extension's .c and .h files (name and bytes, by name): built into the module as
    SOURCE_HASH, so that rocketstore.engine can tell a module built from other sources (a checkout updated
    without a rebuild) and run pure Python instead of failing on a missing function. engine.py computes the
    same."""
    h = hashlib.sha256()
    for path in sorted(glob(os.path.join(folder, "*.[ch]")), key=os.path.basename):
        with open(path, "rb") as f:
            h.update(os.path.basename(path).encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


setup(
    ext_modules=[
        Extension(
            "rocketstore._native",
            sources=sorted(glob(f"{NATIVE}/*.c")),
            depends=sorted(glob(f"{NATIVE}/*.h")),
            define_macros=[("RS_SOURCE_HASH", f'"{sources_hash(NATIVE)}"')],
            libraries=["z"],  # zlib's crc32 (the CRC the zlib module computes)
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fno-strict-aliasing"],
            optional=True,
        )
    ]
)
