"""The compiled hot paths (rocketstore._native), built by `pip install`.

The extension is optional: without a C compiler or Python headers the build warns and the package installs
and runs in pure Python (rocketstore.engine says which engine is in use).
"""

from glob import glob

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "rocketstore._native",
            sources=sorted(glob("src/rocketstore/_native/*.c")),
            depends=sorted(glob("src/rocketstore/_native/*.h")),
            libraries=["z"],  # zlib's crc32 (the CRC the zlib module computes)
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fno-strict-aliasing"],
            optional=True,
        )
    ]
)
