"""``pylog dump-log``: Kafka's ``kafka-dump-log.sh`` (DumpLogSegments) for pylog.

Same flags, same output lines, so runbooks and scripts written for Kafka work:
``Dumping <file>``, one ``baseOffset: ... isvalid: true`` line per batch, one
``| offset: ...`` line per record with ``--deep-iteration`` /
``--print-data-log``, ``offset: N position: P`` per offset index entry and
``timestamp: T offset: N`` per time index entry.  Diagnostics (index
mismatches, non-consecutive offsets, the error behind a torn tail) go to
stderr, as Kafka's do.

Producer state snapshots (``.snapshot``) print one line per producer, as
Kafka's DumpLogSegments prints them (``producerId: ... producerEpoch: ...
lastSequence: ... lastOffset: ...``); both pylog's snapshots (JSON) and
Kafka's (its binary format, version 1) are read.  Transaction indexes
(``.txnindex``, Kafka's format) print one line per aborted transaction.

Like Kafka, damaged data is reported, not fatal: the good batches print, a
batch whose CRC is wrong prints with ``isvalid: false``, and a torn tail ends
with ``Found N invalid bytes at the end of <file>``; the exit status stays 0.
It is 1 only when a file cannot be read or an ``--index-sanity-check`` fails.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from dataclasses import dataclass, field
from types import SimpleNamespace

from pylog.tools.common import refuse_flags

INT32_MAX = 2**31 - 1
COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                 4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}

# Record batch v2 header (61 bytes), big-endian; read directly only for a batch
# the codec refused, whose framing is intact (a CRC mismatch) so Kafka prints it.
_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_ENTRY = struct.Struct(">ii")     # relative offset, position
_TIME_ENTRY = struct.Struct(">qi")       # timestamp, relative offset
# Kafka's producer snapshot (ProducerStateManager, version 1): version, crc32c of
# the rest, then an array of: producer id, epoch, last sequence, last offset,
# offset delta, timestamp, coordinator epoch, current transaction's first offset.
_SNAPSHOT_HEADER = struct.Struct(">hIi")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
KAFKA_SNAPSHOT_VERSION = 1
# Kafka's transaction index entry: version, producer id, first offset, last
# offset, last stable offset.
_TXN_ENTRY = struct.Struct(">hqqqq")
SEQ_MOD = 2**31
# --key-decoder-class / --value-decoder-class: the decoder pylog prints with.
STRING_DECODER = "kafka.serializer.StringDecoder"
# Errors after which the next batch can still be found (the length field is sane).
_FRAMED_CHECKS = {"crc", "records", "compression", "record_count", "control"}


@dataclass
class Report:
    """Diagnostics Kafka collects while dumping and prints to stderr at the end."""

    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    failed: bool = False

    def print(self, err=sys.stderr) -> None:
        for name, items in self.index_mismatches.items():
            print(f"Mismatches in :{name}", file=err)
            for idx, logoff in items:
                print(f"  Index offset: {idx}, log offset: {logoff}", file=err)
        for name, items in self.time_mismatches.items():
            print(f"Found timestamp mismatch in :{name}", file=err)
            for idx, logts in items:
                print(f"  Index timestamp: {idx}, log timestamp: {logts}", file=err)
        for name, items in self.time_out_of_order.items():
            print(f"Found out of order timestamp in :{name}", file=err)
            for idx, prev in items:
                print(f"  Index timestamp: {idx}, Previously indexed timestamp: {prev}",
                      file=err)
        for items in self.time_not_found.values():
            print("The following indexed offsets are not found in the log.", file=err)
            for idx, logoff in items:
                print(f"Indexed offset: {idx}, found log offset: {logoff}", file=err)
        for name, items in self.non_consecutive.items():
            print(f"Non-consecutive offsets in {name}", file=err)
            for first, second in items:
                print(f"  {first} is followed by {second}", file=err)


def _bool(v: bool) -> str:
    return "true" if v else "false"


def _increment_sequence(seq: int, inc: int) -> int:
    # Kafka's DefaultRecordBatch.incrementSequence: sequences wrap at int32 max.
    if seq > INT32_MAX - inc:
        return inc - (INT32_MAX - seq) - 1
    return seq + inc


def _base_offset_of(path: str) -> int | None:
    stem = os.path.basename(path).split(".")[0]
    return int(stem) if stem.isdigit() else None


def _raw_header(buf: object, pos: int) -> SimpleNamespace:
    (base, length, epoch, magic, crc, attrs, delta, first_ts, max_ts, pid, pepoch,
     base_seq, count) = _HEADER.unpack_from(buf, pos)
    return SimpleNamespace(
        base_offset=base, last_offset=base + delta, last_offset_delta=delta,
        partition_leader_epoch=epoch, magic=magic, crc=crc, attributes=attrs,
        compression=attrs & 0x7, timestamp_type=(attrs >> 3) & 1,
        is_transactional=bool(attrs & 0x10), is_control=bool(attrs & 0x20),
        has_delete_horizon=bool(attrs & 0x40), first_timestamp=first_ts,
        max_timestamp=max_ts, producer_id=pid, producer_epoch=pepoch,
        base_sequence=base_seq, record_count=count, size=length + 12)


def _batch_line(b: object, position: int, valid: bool) -> str:
    base_seq = b.base_sequence
    last_seq = -1 if base_seq == -1 else _increment_sequence(base_seq, b.last_offset_delta)
    horizon = (f"OptionalLong[{b.first_timestamp}]" if b.has_delete_horizon
               else "OptionalLong.empty")
    codec = (COMPRESSION_NAMES[b.compression] if b.compression < len(COMPRESSION_NAMES)
             else f"unknown({b.compression})")
    return (f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} "
            f"count: {b.record_count} baseSequence: {base_seq} lastSequence: {last_seq} "
            f"producerId: {b.producer_id} producerEpoch: {b.producer_epoch} "
            f"partitionLeaderEpoch: {b.partition_leader_epoch} "
            f"isTransactional: {_bool(b.is_transactional)} "
            f"isControl: {_bool(b.is_control)} deleteHorizonMs: {horizon} "
            f"position: {position} {TIMESTAMP_TYPES[b.timestamp_type]}: {b.max_timestamp} "
            f"size: {b.size} magic: {b.magic} compresscodec: {codec} crc: {b.crc} "
            f"isvalid: {_bool(valid)}")


def _text(data: bytes) -> str:
    # Kafka's StringDecoder: UTF-8, malformed input replaced.
    return bytes(data).decode("utf-8", "replace")


def _control_text(key: bytes | None, value: bytes | None) -> str:
    if key is None or len(key) < 4:
        return " controlType: UNKNOWN(-1)"
    type_id = struct.unpack_from(">h", key, 2)[0]
    name = CONTROL_TYPES.get(type_id, "UNKNOWN")
    if name in ("ABORT", "COMMIT") and value is not None and len(value) >= 6:
        epoch = struct.unpack_from(">i", value, 2)[0]
        return f" endTxnMarker: {name} coordinatorEpoch: {epoch}"
    return f" controlType: {name}({type_id})"


def _record_line(batch: object, rec: object, print_data: bool, skip_metadata: bool) -> str:
    parts = ["|"]
    sep = " "
    if not skip_metadata:
        key_size = -1 if rec.key is None else len(rec.key)
        value_size = -1 if rec.value is None else len(rec.value)
        seq = (-1 if batch.base_sequence < 0 else
               _increment_sequence(batch.base_sequence, rec.offset - batch.base_offset))
        header_keys = ",".join(k if isinstance(k, str) else _text(k) for k, _ in rec.headers)
        parts.append(f" offset: {rec.offset} {TIMESTAMP_TYPES[batch.timestamp_type]}: "
                     f"{rec.timestamp} keySize: {key_size} valueSize: {value_size}"
                     f" sequence: {seq} headerKeys: [{header_keys}]")
        if batch.is_control:
            parts.append(_control_text(rec.key, rec.value))
    if print_data and not batch.is_control:
        if rec.key is not None:
            parts.append(f"{sep}key: {_text(rec.key)}")
        if rec.value is not None:
            parts.append(f" payload: {_text(rec.value)}")
    return "".join(parts)


def dump_log(path: str, args: argparse.Namespace, report: Report) -> None:
    base = _base_offset_of(path)
    if path.endswith(".log") and base is not None:
        print(f"Log starting offset: {base}")
    # Imported here: pyarrow takes a while to load, other subcommands skip it.
    from pylog.log.mapped_reader import MappedSegment

    deep = args.deep_iteration or args.print_data_log
    seg = MappedSegment(path, None if args.max_bytes >= INT32_MAX else args.max_bytes)
    valid_end = 0
    last_offset = -1
    gaps: list[tuple[int, int]] = []
    start = 0
    while True:
        for pos, batch in seg.batches(start):
            print(_batch_line(batch, pos, True))
            valid_end = pos + batch.size
            if not deep:
                continue
            for rec in batch.records():
                if last_offset != -1 and rec.offset != last_offset + 1:
                    gaps.append((last_offset, rec.offset))
                last_offset = rec.offset
                print(_record_line(batch, rec, args.print_data_log, args.skip_record_metadata))
        err = seg.error
        if err is None:
            break
        print(f"Corrupt batch at position {err.position}: {err.message}", file=sys.stderr)
        if err.check not in _FRAMED_CHECKS:
            break
        # The batch is whole but fails a content check: print it as Kafka does
        # (isvalid: false), skip its records, carry on with the next batch.
        header = _raw_header(seg.buffer, err.position)
        print(_batch_line(header, err.position, False))
        valid_end = start = err.position + header.size
    trailing = seg.size - valid_end
    if trailing > 0 and not seg.limited:
        print(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}")
    if gaps:
        report.non_consecutive[os.path.abspath(path)] = gaps


def _log_batches(index_path: str) -> list | None:
    """(base, last, max_timestamp, position) of each good batch of the index's log."""
    log_path = os.path.join(os.path.dirname(os.path.abspath(index_path)),
                            os.path.basename(index_path).split(".")[0] + ".log")
    if not os.path.exists(log_path):
        print(f"No log file {log_path} next to {index_path}: entries not checked",
              file=sys.stderr)
        return None
    from pylog.log.mapped_reader import MappedSegment

    seg = MappedSegment(log_path)
    return [(b.base_offset, b.last_offset, b.max_timestamp, pos) for pos, b in seg.batches()]


def _read_entries(path: str, entry: struct.Struct) -> tuple[bytes, int]:
    with open(path, "rb") as f:
        data = f.read()
    return data, len(data) // entry.size


def offset_index_problems(data: bytes, base: int, log_size: int | None) -> list[str]:
    """What makes an offset index inconsistent (Kafka's sanity check, and more)."""
    problems = []
    if len(data) % _OFFSET_ENTRY.size:
        problems.append(f"found {len(data)} bytes which is not a multiple of "
                        f"{_OFFSET_ENTRY.size}")
    prev_rel = prev_pos = -1
    for i in range(len(data) // _OFFSET_ENTRY.size):
        rel, pos = _OFFSET_ENTRY.unpack_from(data, i * _OFFSET_ENTRY.size)
        if i > 0 and rel == 0:
            break  # preallocated, never-written entries
        if rel < 0 or pos < 0:
            problems.append(f"entry {i} is negative (offset {base + rel}, position {pos})")
        elif i > 0 and (rel <= prev_rel or pos <= prev_pos):
            problems.append(f"entry {i} (offset {base + rel}, position {pos}) does not "
                            f"follow entry {i - 1} (offset {base + prev_rel}, "
                            f"position {prev_pos})")
        elif log_size is not None and pos >= log_size:
            problems.append(f"entry {i} position {pos} is past the log end {log_size}")
        prev_rel, prev_pos = rel, pos
    return problems


def time_index_problems(data: bytes) -> list[str]:
    problems = []
    if len(data) % _TIME_ENTRY.size:
        problems.append(f"found {len(data)} bytes which is not a multiple of "
                        f"{_TIME_ENTRY.size}")
    prev_ts = prev_rel = None
    for i in range(len(data) // _TIME_ENTRY.size):
        ts, rel = _TIME_ENTRY.unpack_from(data, i * _TIME_ENTRY.size)
        if i > 0 and ts == 0 and rel == 0:
            break
        if prev_ts is not None and (ts < prev_ts or rel < prev_rel):
            problems.append(f"entry {i} (timestamp {ts}, offset +{rel}) goes back from "
                            f"entry {i - 1} (timestamp {prev_ts}, offset +{prev_rel})")
        prev_ts, prev_rel = ts, rel
    return problems


def _sanity(path: str, problems: list[str], report: Report) -> None:
    if problems:
        report.failed = True
        print(f"{path} failed sanity check: {problems[0]}"
              + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
              file=sys.stderr)
    else:
        print(f"{path} passed sanity check.")


def _batch_at(batches: list, offset: int) -> tuple | None:
    for b in batches:
        if b[0] <= offset <= b[1]:
            return b
    return None


def dump_index(path: str, args: argparse.Namespace, report: Report) -> None:
    base = _base_offset_of(path) or 0
    data, entries = _read_entries(path, _OFFSET_ENTRY)
    if entries == 0:
        print(f"{path} is empty.")
        return
    if args.index_sanity_check:
        log_path = os.path.splitext(os.path.abspath(path))[0] + ".log"
        log_size = os.path.getsize(log_path) if os.path.exists(log_path) else None
        _sanity(path, offset_index_problems(data, base, log_size), report)
        return
    batches = _log_batches(path)
    by_position = {b[3]: b for b in batches or ()}
    mismatches: list[tuple[int, int]] = []
    for i in range(entries):
        rel, pos = _OFFSET_ENTRY.unpack_from(data, i * _OFFSET_ENTRY.size)
        offset = base + rel
        if offset == base and i > 0:
            break  # the zero entries of a preallocated index
        if batches is not None:
            # Kafka indexes a batch's last offset, pylog its base offset: either
            # names the batch starting at the position.
            b = by_position.get(pos)
            if b is None or not b[0] <= offset <= b[1]:
                mismatches.append((offset, -1 if b is None else b[1]))
        if not args.verify_index_only:
            print(f"offset: {offset} position: {pos}")
    if mismatches:
        report.index_mismatches[os.path.abspath(path)] = mismatches


def dump_time_index(path: str, args: argparse.Namespace, report: Report) -> None:
    base = _base_offset_of(path) or 0
    data, entries = _read_entries(path, _TIME_ENTRY)
    if args.index_sanity_check:
        _sanity(path, time_index_problems(data), report)
        return
    batches = _log_batches(path)
    name = os.path.abspath(path)
    prev_ts = -1
    for i in range(entries):
        ts, rel = _TIME_ENTRY.unpack_from(data, i * _TIME_ENTRY.size)
        offset = base + rel
        if offset == base and i > 0:
            break
        if batches is not None:
            b = _batch_at(batches, offset)
            if b is None:
                report.time_not_found.setdefault(name, []).append((offset, -1))
            else:
                if b[2] != ts:
                    report.time_mismatches.setdefault(name, []).append((ts, b[2]))
                if prev_ts >= ts:
                    report.time_out_of_order.setdefault(name, []).append((ts, prev_ts))
        if not args.verify_index_only:
            print(f"timestamp: {ts} offset: {offset}")
        prev_ts = ts


class CorruptSnapshot(Exception):
    """Kafka's CorruptSnapshotException: the message goes to stderr."""


@dataclass
class SnapshotEntry:
    producer_id: int
    epoch: int
    coordinator_epoch: int
    txn_first_offset: int  # -1: no open transaction
    last_timestamp: int
    # (last sequence, last offset, offset delta, timestamp) of the last batch
    batch: tuple[int, int, int, int] | None


def _kafka_snapshot(data: bytes) -> list[SnapshotEntry]:
    from pylog.records.pyrecords import crc32c

    if len(data) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshot("Snapshot failed schema validation: Error reading field "
                              "'version': java.nio.BufferUnderflowException")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data)
    room = len(data) - _SNAPSHOT_HEADER.size
    if count < 0 or count * _SNAPSHOT_ENTRY.size > room:
        raise CorruptSnapshot(f"Snapshot failed schema validation: Error reading field "
                              f"'producer_entries': Error reading array of size {count}, "
                              f"only {room} bytes available")
    if version != KAFKA_SNAPSHOT_VERSION:
        raise CorruptSnapshot(f"Snapshot contained an unknown file version {version}")
    computed = crc32c(data[6:])
    if crc != computed:
        raise CorruptSnapshot(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: "
                              f"{crc}. Computed crc: {computed}")
    out = []
    for i in range(count):
        pid, epoch, seq, offset, delta, ts, coord, txn = _SNAPSHOT_ENTRY.unpack_from(
            data, _SNAPSHOT_HEADER.size + i * _SNAPSHOT_ENTRY.size)
        out.append(SnapshotEntry(pid, epoch, coord, txn, ts,
                                 (seq, offset, delta, ts) if offset >= 0 else None))
    return out


def _pylog_snapshot(data: bytes) -> list[SnapshotEntry]:
    """pylog's snapshot (pylog.server.producer_state): each producer's batches
    are (first sequence, last sequence, base offset, append time); Kafka's
    snapshot keeps the last batch, so that one is shown."""
    from pylog.server.producer_state import SNAPSHOT_VERSION

    try:
        state = json.loads(data)
        version = int(state["version"])
        if version < 1 or version > SNAPSHOT_VERSION:
            raise CorruptSnapshot(f"Snapshot contained an unknown file version {version}")
        out = []
        for pid, raw in sorted(state["producers"].items(), key=lambda kv: int(kv[0])):
            last_ts = int(raw.get("last_timestamp", -1))  # none before version 2
            batch = None
            if raw["batches"]:
                first, last, base, _ = raw["batches"][-1]
                delta = (last - first) % SEQ_MOD
                batch = (last, base + delta, delta, last_ts)
            out.append(SnapshotEntry(int(pid), int(raw["epoch"]),
                                     int(raw.get("coordinator_epoch", -1)),
                                     int(raw.get("txn_first", -1)), last_ts, batch))
        return out
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptSnapshot(f"Snapshot failed schema validation: {exc!r}") from None


def _optional_long(value: int) -> str:
    """Java's OptionalLong.toString, as Kafka prints currentTxnFirstOffset."""
    return f"OptionalLong[{value}]" if value >= 0 else "OptionalLong.empty"


def _first_sequence(last: int, delta: int) -> int:
    """Kafka's DefaultRecordBatch.decrementSequence."""
    return last - delta if last >= delta else INT32_MAX - (delta - last) + 1


def dump_producer_snapshot(path: str) -> None:
    """Kafka's dumpProducerIdSnapshot: one line per producer."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        entries = (_pylog_snapshot(data) if data.lstrip()[:1] == b"{"
                   else _kafka_snapshot(data))
    except CorruptSnapshot as exc:
        print(str(exc), file=sys.stderr)
        return
    for e in entries:
        line = (f"producerId: {e.producer_id} producerEpoch: {e.epoch} "
                f"coordinatorEpoch: {e.coordinator_epoch} "
                f"currentTxnFirstOffset: {_optional_long(e.txn_first_offset)} "
                f"lastTimestamp: {e.last_timestamp} ")
        if e.batch is not None:
            last, offset, delta, ts = e.batch
            line += (f"firstSequence: {_first_sequence(last, delta)} lastSequence: {last} "
                     f"lastOffset: {offset} offsetDelta: {delta} timestamp: {ts}")
        print(line)


def dump_txn_index(path: str) -> None:
    """Kafka's dumpTxnIndex: one line per aborted transaction."""
    with open(path, "rb") as f:
        data = f.read()
    whole = len(data) - len(data) % _TXN_ENTRY.size
    for pos in range(0, whole, _TXN_ENTRY.size):
        version, pid, first, last, lso = _TXN_ENTRY.unpack_from(data, pos)
        print(f"version: {version} producerId: {pid} firstOffset: {first} "
              f"lastOffset: {last} lastStableOffset: {lso}")
    if whole != len(data):
        print(f"Expected transaction index {path} to be a multiple of {_TXN_ENTRY.size} "
              f"bytes, but it has {len(data)}", file=sys.stderr)


def _check_decoders(args: argparse.Namespace) -> bool:
    """--key-decoder-class / --value-decoder-class: Kafka's StringDecoder, which
    pylog prints with, is accepted (and, as in Kafka, implies --print-data-log);
    another class is refused by name."""
    for flag, value in (("--key-decoder-class", args.key_decoder_class),
                        ("--value-decoder-class", args.value_decoder_class)):
        if value is not None and value != STRING_DECODER:
            print(f"{flag} {value} is not supported by pylog: it decodes with "
                  f"{STRING_DECODER} only", file=sys.stderr)
            return False
    if args.key_decoder_class is not None or args.value_decoder_class is not None:
        args.print_data_log = True
    return True


def run(args: argparse.Namespace) -> int:
    if not _check_decoders(args):
        return 1
    report = Report()
    status = 0
    for path in args.files.split(","):
        path = path.strip()
        if not path:
            continue
        print(f"Dumping {path}")
        suffix = os.path.splitext(path)[1]
        try:
            if suffix == ".log":
                dump_log(path, args, report)
            elif suffix == ".index":
                dump_index(path, args, report)
            elif suffix == ".timeindex":
                dump_time_index(path, args, report)
            elif suffix == ".snapshot":
                dump_producer_snapshot(path)
            elif suffix == ".txnindex":
                dump_txn_index(path)
            else:
                print(f"Ignoring unknown file {path}", file=sys.stderr)
        except OSError as exc:
            print(f"Cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
            status = 1
        sys.stdout.flush()
    report.print()
    return 1 if report.failed else status


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dump-log",
        help="dump log segments and indexes (kafka-dump-log)",
        description="Parse a log file and dump its contents to the console, useful for "
                    "debugging a seemingly corrupt log segment.")
    p.add_argument("--files", required=True, metavar="file1,file2,...",
                   help="REQUIRED: the comma separated list of data and index log files "
                        "to be dumped")
    p.add_argument("--print-data-log", action="store_true",
                   help="print the messages' content (implies --deep-iteration)")
    p.add_argument("--deep-iteration", action="store_true",
                   help="print every record, not only batch headers")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="do not print each record's metadata")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="only check the indexes are consistent (the check a broker runs at "
                        "startup to decide whether to rebuild them)")
    p.add_argument("--verify-index-only", action="store_true",
                   help="check the index against the log without printing its entries")
    p.add_argument("--max-bytes", type=int, default=INT32_MAX, metavar="size",
                   help="limit the bytes of batches read from each .log file")
    p.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024, metavar="size",
                   help="size of the largest message (accepted for Kafka compatibility)")
    for which in ("key", "value"):
        p.add_argument(f"--{which}-decoder-class", nargs="?", const=STRING_DECODER,
                       metavar="class",
                       help=f"the {which}s' decoder; only {STRING_DECODER} (implies "
                            "--print-data-log)")
    refuse_flags(p, {"--offsets-decoder": "pylog dump-log does not decode __consumer_offsets "
                                          "records",
                     "--transaction-log-decoder": "pylog dump-log does not decode "
                                                  "__transaction_state records",
                     "--cluster-metadata-decoder": "pylog keeps no KRaft metadata log"})
    p.set_defaults(func=run)
