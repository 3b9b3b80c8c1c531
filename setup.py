"""Build of pylog's native extensions.

Every ``native/<name>.pyx`` becomes ``pylog._native.<name>``.  C sources a
module needs besides its own generated C are listed in ``C_SOURCES``.  No
``-march=native``: the CRC32C hardware path is compiled with a per-function
``target`` attribute and chosen at import by CPU detection, so one build runs
on any x86-64 (and anything else, through the portable fallback).
"""

import os
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent
NATIVE = "native"

# Extra C sources per extension (paths relative to the repository root).
C_SOURCES: dict[str, list[str]] = {
    "crc32c": ["native/crc32c/crc32c.c"],
    "records": ["native/crc32c/crc32c.c"],
    "cleaner": ["native/crc32c/crc32c.c"],
}

COMPILE_ARGS = ["-O3", "-std=c11", "-fno-strict-aliasing", "-Wno-unused-function"]


def extensions() -> list[Extension]:
    # PYLOG_EXT=name[,name] builds only those modules (handy while working on one).
    only = {n for n in os.environ.get("PYLOG_EXT", "").split(",") if n}
    exts = []
    for pyx in sorted((HERE / NATIVE).glob("*.pyx")):
        name = pyx.stem
        if only and name not in only:
            continue
        exts.append(
            Extension(
                f"pylog._native.{name}",
                sources=[f"{NATIVE}/{pyx.name}", *C_SOURCES.get(name, [])],
                include_dirs=[NATIVE, f"{NATIVE}/crc32c", f"{NATIVE}/include"],
                extra_compile_args=COMPILE_ARGS,
            )
        )
    return exts


setup(
    ext_modules=cythonize(
        extensions(),
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "embedsignature": True,
        },
    ),
)
