"""Shared record batch vectors: what to build, and what reading it must give.

A vector is a list of batches, each a ``BatchBuilder`` keyword set plus its
records ``(timestamp, key, value, headers, offset_delta)``.  ``build(impl)``
makes the bytes with one implementation's builder (native or pure), and
``expected()`` says which records a reader must return.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
T0 = 1_700_000_000_000  # a plausible epoch-ms timestamp


@dataclass
class Spec:
    kwargs: dict
    records: list[tuple]  # (timestamp, key, value, headers, offset_delta|None)


@dataclass
class Vector:
    name: str
    batches: list[Spec]
    strict: bool = True  # passes validate(strict=True)
    tags: set = field(default_factory=set)

    def build(self, impl) -> bytes:
        out = []
        for spec in self.batches:
            builder = impl.BatchBuilder(**spec.kwargs)
            for ts, key, value, headers, delta in spec.records:
                builder.append(ts, key, value, headers, delta)
            out.append(builder.build())
        return b"".join(out)

    def expected(self) -> list[tuple]:
        """``(offset, timestamp, key, value, headers)`` of every record, in order."""
        out = []
        for spec in self.batches:
            base = spec.kwargs.get("base_offset", 0)
            log_append = spec.kwargs.get("timestamp_type", 0) == 1
            max_ts = max(r[0] for r in spec.records)
            last = -1
            for ts, key, value, headers, delta in spec.records:
                last = last + 1 if delta is None else delta
                out.append((base + last, max_ts if log_append else ts, key, value,
                            [(k, v) for k, v in headers]))
        return out

    @property
    def compressed(self) -> bool:
        return any(s.kwargs.get("compression", 0) for s in self.batches)


def _recs(n: int, size: int = 10, *, seed: int = 0, headers: bool = False) -> list[tuple]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        hdrs = [(f"h{i % 3}", rnd.randbytes(i % 5))] if headers and i % 2 else []
        out.append((T0 + i, f"key-{i}".encode(), rnd.randbytes(size), hdrs, None))
    return out


def _one(key=b"k", value=b"v", headers=(), ts=T0) -> list[tuple]:
    return [(ts, key, value, list(headers), None)]


# A transaction commit marker: key (version 0, type 1 = commit), value
# (version 0, coordinator epoch 7).
_COMMIT_KEY = struct.pack(">hh", 0, 1)
_COMMIT_VALUE = struct.pack(">hi", 0, 7)


def vectors() -> list[Vector]:
    v = [
        Vector("empty-key-and-value", [Spec({}, _one(b"", b""))]),
        Vector("one-record", [Spec({}, _one())]),
        Vector("null-key", [Spec({}, _one(key=None))]),
        Vector("null-value", [Spec({}, _one(value=None))]),
        Vector("null-key-and-value", [Spec({}, _one(None, None))]),
        Vector("headers", [Spec({}, _one(headers=[("a", b"1"), ("null", None), ("ünï", b""),
                                                  ("a", b"dup")]))]),
        Vector("1000-records", [Spec({}, _recs(1000, 20, headers=True))]),
        Vector("large-value-1MiB", [Spec({}, _one(value=bytes(range(256)) * 4096))],
               tags={"large"}),
        Vector("negative-timestamp-delta",
               [Spec({}, [(T0 + 50, b"a", b"1", [], None), (T0, b"b", b"2", [], None),
                          (T0 + 99, b"c", b"3", [], None)])]),
        Vector("timestamp-minus-one", [Spec({}, _one(ts=-1))]),
        Vector("producer-state", [Spec({"producer_id": 123456789012, "producer_epoch": 7,
                                        "base_sequence": 42}, _recs(5))]),
        Vector("transactional", [Spec({"producer_id": 99, "producer_epoch": 1,
                                       "base_sequence": 0, "is_transactional": True},
                                      _recs(3))]),
        Vector("control-commit", [Spec({"producer_id": 99, "producer_epoch": 1,
                                        "is_transactional": True, "is_control": True},
                                       _one(_COMMIT_KEY, _COMMIT_VALUE))]),
        Vector("log-append-time", [Spec({"timestamp_type": 1}, _recs(4))]),
        Vector("leader-epoch-and-base-offset",
               [Spec({"base_offset": 2**40, "partition_leader_epoch": 17}, _recs(3))]),
        Vector("multiple-batches",
               [Spec({"base_offset": 0}, _recs(3, seed=1)),
                Spec({"base_offset": 3, "compression": 1}, _recs(4, seed=2)),
                Spec({"base_offset": 7}, _one())]),
        # What the log cleaner leaves: offset gaps (lastOffsetDelta > count - 1).
        Vector("compacted-gaps",
               [Spec({}, [(T0, b"a", b"1", [], 0), (T0 + 1, b"b", None, [], 5),
                          (T0 + 2, b"c", b"3", [], 9)])], strict=False),
    ]
    for name, codec in CODECS.items():
        if codec:
            v.append(Vector(f"compressed-{name}",
                            [Spec({"compression": codec}, _recs(300, 50, headers=True))]))
            v.append(Vector(f"compressed-{name}-large",
                            [Spec({"compression": codec}, _one(value=b"x" * 300_000))]))
    return v


VECTORS = vectors()
VECTOR_IDS = [vec.name for vec in VECTORS]
