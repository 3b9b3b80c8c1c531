"""Kafka record batches (magic v2): validate, stamp, read and build.

The native codec (``pylog._native.records``, from ``native/records.pyx``) is
the implementation; :mod:`pylog.records.pyrecords` is its pure-Python twin
with the same API and errors, used when the extension is not built
(``IMPLEMENTATION`` says which one is in use).
"""

from __future__ import annotations

try:
    from pylog._native.records import (
        BATCH_FIELDS,
        CHECK_NAMES,
        Batch,
        BatchBuilder,
        BatchInfo,
        Record,
        build_batch,
        iter_records,
        read_batches,
        stamp,
        validate,
        validate_summary,
    )

    IMPLEMENTATION = "native"
except ImportError:  # extension not built: fall back to the reference
    from pylog.records.pyrecords import (  # noqa: F401
        BATCH_FIELDS,
        CHECK_NAMES,
        Batch,
        BatchBuilder,
        BatchInfo,
        Record,
        build_batch,
        iter_records,
        read_batches,
        stamp,
        validate,
        validate_summary,
    )

    IMPLEMENTATION = "python"

from pylog.errors import CodecError, CorruptBatchError  # noqa: E402

__all__ = [
    "BATCH_FIELDS", "CHECK_NAMES", "Batch", "BatchBuilder", "BatchInfo", "CodecError",
    "CorruptBatchError", "IMPLEMENTATION", "Record", "build_batch", "iter_records",
    "read_batches", "stamp", "validate", "validate_summary",
]
