"""The native compaction codec (``pylog._native.cleaner``) against a plain-Python reference.

Seeded random logs of v2 batches built with ``BatchBuilder``: every codec,
CreateTime and LogAppendTime, headers, null keys, tombstones, empty values,
control batches, batches with offset gaps (what a previous clean leaves:
fewer records than ``lastOffsetDelta + 1``) and batches with a delete horizon
(KIP-534: what a previous clean leaves when it keeps tombstones).  The
reference computes each key's latest offset and the records a clean keeps;
the native ``OffsetMap`` and ``RecordFilter`` must agree record for record,
keep every batch's base offset, producer fields and lastOffsetDelta, keep its
base timestamp unless they give it a delete horizon, write valid CRCs, and
count what they did.
"""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
from pylog._native.cleaner import OffsetMap, RecordFilter, TxnRanges

from pylog.records import BatchBuilder, read_batches, validate

SLOT = 24  # bytes a key in the map
COMMIT_KEY = b"\x00\x00\x00\x01"  # ControlRecordType: version 0, COMMIT
ABORT_KEY = b"\x00\x00\x00\x00"  # version 0, ABORT
CONTROL_VALUE = b"\x00\x00\x00\x00\x00\x00"
NOW = 1_800_000_000_000  # the clean's time; the vectors' horizons lie within 1 s of it
RETENTION = 5_000  # delete.retention.ms: the horizon a clean stamps is NOW + this
TXN_PIDS = range(2000, 2004)  # the transactional producers of the random logs


def _marker(offset: int, pid: int, commit: bool, ts: int, horizon: int | None = None) -> bytes:
    b = BatchBuilder(base_offset=offset, is_control=True, is_transactional=True,
                     producer_id=pid, producer_epoch=0, base_sequence=-1,
                     delete_horizon_ms=horizon)
    b.append(ts, COMMIT_KEY if commit else ABORT_KEY, CONTROL_VALUE)
    return b.build()


def _random_log(seed: int, batches: int = 120, keys: int = 15,
                codecs: tuple[int, ...] = (0, 1, 2, 3, 4), leave_open: bool = False) -> bytes:
    """Consecutive batches from offset 0; some with offset gaps; some of
    idempotent producers; some of transactions of four producers, each
    ended by a COMMIT or ABORT marker (or, ``leave_open``, some left open),
    with markers of transactions that have no batch here (their records
    cleaned already, or none written), some with a delete horizon as a clean
    leaves them."""
    rng = random.Random(seed)
    out = bytearray()
    offset = 0
    ts = 1_700_000_000_000
    open_txns: set[int] = set()
    for _ in range(batches):
        pid = rng.choice(TXN_PIDS)
        if rng.random() < 0.12:
            horizon = NOW + rng.randrange(-1000, 1000) if rng.random() < 0.3 else None
            out += _marker(offset, pid, rng.random() < 0.6, ts, horizon)
            open_txns.discard(pid)
            offset += 1
            continue
        in_txn = rng.random() < 0.35
        producer = ((pid, 0, rng.randrange(10_000)) if in_txn
                    else (rng.randrange(1, 1000), rng.randrange(5), rng.randrange(10_000))
                    if rng.random() < 0.3 else (-1, -1, -1))
        if in_txn:
            open_txns.add(pid)
        horizon = NOW + rng.randrange(-1000, 1000) if rng.random() < 0.15 else None
        b = BatchBuilder(compression=rng.choice(codecs), timestamp_type=rng.randrange(2),
                         base_offset=offset, partition_leader_epoch=rng.randrange(-1, 3),
                         producer_id=producer[0], producer_epoch=producer[1],
                         base_sequence=producer[2], delete_horizon_ms=horizon,
                         is_transactional=in_txn)
        gaps = rng.random() < 0.2
        delta = -1
        for _ in range(rng.randrange(1, 9)):
            delta += rng.randrange(1, 4) if gaps else 1
            r = rng.random()
            key = None if r < 0.08 else b"key-%d" % rng.randrange(keys)
            r = rng.random()
            value = (None if r < 0.12 else b"" if r < 0.2
                     else b"v%d-" % offset * rng.randrange(1, 30))
            headers = [(f"h{i}", None if rng.random() < 0.2 else bytes([i]) * i)
                       for i in range(rng.randrange(3))]
            # Timestamps jump around: the max is not always the last.
            b.append(ts + rng.randrange(-500, 500), key, value, headers, offset_delta=delta)
        out += b.build()
        offset += delta + 1
        ts += rng.randrange(0, 100)
    for pid in sorted(open_txns) if not leave_open else ():
        out += _marker(offset, pid, rng.random() < 0.6, ts)
        offset += 1
    return bytes(out)


def _records(buf) -> list[tuple]:
    return [(r.offset, r.key, r.value, [tuple(h) for h in r.headers], r.timestamp)
            for batch in read_batches(buf) if not batch.is_control for r in batch.records()]


class _Txns:
    """The reference transaction scan: (pid, first, marker offset, commit)
    of each ended transaction with a batch in the log."""

    def __init__(self, buf, stop_offset: int = 2**63 - 1) -> None:
        opened: dict[int, int] = {}
        self.ranges: list[tuple[int, int, int, bool]] = []
        for batch in read_batches(buf):
            if batch.base_offset >= stop_offset or not batch.is_transactional:
                continue
            pid = batch.producer_id
            if not batch.is_control:
                opened.setdefault(pid, batch.base_offset)
            elif pid in opened:
                key = next(iter(batch.records())).key
                self.ranges.append((pid, opened.pop(pid), batch.base_offset, key == COMMIT_KEY))
        self.open = len(opened)

    def of(self, batch) -> tuple[str, tuple | None]:
        if not batch.is_transactional:
            return "none", None
        for r in self.ranges:
            if r[0] == batch.producer_id and r[1] <= batch.base_offset <= r[2]:
                return ("committed" if r[3] else "aborted"), r
        return "undecided", None


def _latest(buf, stop_offset: int = 2**63 - 1, txns: _Txns | None = None) -> dict[bytes, int]:
    """The reference map: key -> latest offset, batches based below
    ``stop_offset``; without ``txns`` no transaction's records (an aborted
    one must not remove a committed value), with it committed ones, up to
    the first batch of a transaction still open."""
    latest: dict[bytes, int] = {}
    for batch in read_batches(buf):
        if txns is not None and not batch.is_control and txns.of(batch)[0] == "undecided":
            break
        if batch.base_offset >= stop_offset or batch.is_control:
            continue
        if batch.is_transactional and (txns is None or txns.of(batch)[0] != "committed"):
            continue
        for r in batch.records():
            if r.key is not None:
                latest[r.key] = max(latest.get(r.key, -1), r.offset)
    return latest


def _retains_tombstones(batch, now: int) -> bool:
    """KIP-534: a batch's tombstones stay until its delete horizon passes."""
    return not batch.has_delete_horizon or now < batch.first_timestamp


def _expected(buf, latest: dict[bytes, int], now: int, txns: _Txns | None = None):
    """(batch, kept records, stamped) of each batch the clean keeps, as the
    cleaner must do: ``stamped`` when it gives the batch a delete horizon."""
    out = []
    retained: set[tuple] = set()
    for batch in read_batches(buf):
        records = list(batch.records())
        kind, txn = ("undecided", None) if txns is None else txns.of(batch)
        if batch.is_control:
            if txns is None or records[0].key != COMMIT_KEY or txn in retained:
                out.append((batch, records, False))
            elif not batch.has_delete_horizon:
                out.append((batch, records, True))
            elif now < batch.first_timestamp:
                out.append((batch, records, False))
            continue
        if kind == "aborted":
            continue
        retain = _retains_tombstones(batch, now)
        kept = [r for r in records if r.key is not None
                and latest.get(r.key, -1) <= r.offset
                and (retain or r.value is not None)]
        if kept:
            if txn is not None:
                retained.add(txn)
            out.append((batch, kept, not batch.has_delete_horizon
                        and any(r.value is None for r in kept)))
    return out


def _native_txns(buf, stop_offset: int = 2**63 - 1) -> TxnRanges:
    t = TxnRanges()
    assert t.scan(buf, 0, len(buf), stop_offset) == len(buf) or stop_offset < 2**63 - 1
    t.done()
    return t


def _native_map(buf, memory: int = 1 << 20, stop_offset: int = 2**63 - 1,
                txns: TxnRanges | None = None) -> OffsetMap:
    m = OffsetMap(memory)
    pos, full = m.add_batches(buf, 0, len(buf), stop_offset, txns)
    assert full == m.undecided  # never for want of room here
    return m


def _check_output(buf, out, latest: dict[bytes, int], now: int,
                  txns: _Txns | None = None) -> None:
    expected = _expected(buf, latest, now, txns)
    infos = validate(out, strict=False)  # CRCs, lengths, record counts
    assert len(infos) == len(expected)
    by_base = {b.base_offset: b for b in read_batches(buf)}
    raw_in = {b.base_offset: bytes(buf[b.position:b.position + b.size])
              for b in validate(buf, strict=False)}
    got_batches = list(read_batches(out))
    for info, got, (src, kept, stamped) in zip(infos, got_batches, expected, strict=True):
        assert got.base_offset == src.base_offset
        src = by_base[got.base_offset]
        assert got.last_offset_delta == src.last_offset_delta
        if stamped:
            assert got.first_timestamp == NOW + RETENTION and got.has_delete_horizon
            assert got.attributes == src.attributes | 0x40
        else:
            assert got.first_timestamp == src.first_timestamp
            assert got.attributes == src.attributes
        assert (got.producer_id, got.producer_epoch, got.base_sequence) == (
            src.producer_id, src.producer_epoch, src.base_sequence)
        assert got.partition_leader_epoch == src.partition_leader_epoch
        assert got.record_count == len(kept)
        raw_out = bytes(out[info.position:info.position + info.size])
        if len(kept) == src.record_count and not stamped:
            assert raw_out == raw_in[src.base_offset], "a batch keeping all was not copied"
        elif src.timestamp_type == 0:
            assert got.max_timestamp == max(r.timestamp for r in kept)
        else:
            assert got.max_timestamp == src.max_timestamp  # LogAppendTime: unchanged
        # Record timestamps survive a new base timestamp (their deltas are re-encoded).
        assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in got.records()] == [
            (r.offset, r.key, r.value, r.headers, r.timestamp) for r in kept]


def _filter(m: OffsetMap, buf, now: int, window: int | None = None,
            rng: random.Random | None = None,
            txns: TxnRanges | None = None) -> tuple[bytearray, RecordFilter]:
    f = RecordFilter()
    out = bytearray()
    pos = 0
    while pos < len(buf):
        end = len(buf) if window is None else min(len(buf), pos + rng.randrange(1, window))
        pos = f.run(m, buf, pos, end, now, NOW + RETENTION, txns=txns)
        out += f.take()
    return out, f


# Before every horizon of the vectors, among them, past them all.
CLEAN_TIMES = [NOW - 2000, NOW, NOW + 2000]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("now", CLEAN_TIMES)
@pytest.mark.parametrize("aware", [True, False], ids=["txns", "no-txns"])
def test_filter_matches_the_reference(seed: int, now: int, aware: bool) -> None:
    buf = _random_log(seed)
    ref_txns = _Txns(buf) if aware else None
    txns = _native_txns(buf) if aware else None
    if aware:
        assert len(txns) == len(ref_txns.ranges) and txns.open == ref_txns.open
        assert {r[3] for r in ref_txns.ranges} == {True, False}  # the vectors have both
    latest = _latest(buf, txns=ref_txns)
    m = _native_map(buf, txns=txns)
    assert m.size == len(latest)
    for key, offset in latest.items():
        assert m.get(key) == offset
    assert m.get(b"never-written") == -1
    last = list(read_batches(buf))[-1]
    assert m.latest_offset == last.base_offset + last.last_offset_delta

    out, f = _filter(m, buf, now, txns=txns)
    _check_output(buf, out, latest, now, ref_txns)
    kept = _expected(buf, latest, now, ref_txns)
    all_batches = list(read_batches(buf))
    data = [b for b in all_batches if not b.is_control]
    assert f.records_read == sum(b.record_count for b in data)
    assert f.records_kept == sum(len(k) for b, k, _ in kept if not b.is_control)
    assert f.batches_read == len(all_batches)
    assert f.batches_kept == len(kept)
    assert f.bytes_read == len(buf)
    assert f.bytes_written == len(out)
    assert f.pending == 0
    out_batches = list(read_batches(out))
    assert f.max_timestamp == max(b.max_timestamp for b in out_batches)
    aborted = [b for b in data if aware and ref_txns.of(b)[0] == "aborted"]
    assert f.aborted_batches_removed == len(aborted)
    controls = [b for b in all_batches if b.is_control]
    assert f.markers_removed == len(controls) - sum(b.is_control for b, _, _ in kept)
    if aware:  # the vectors exercise both (markers go once their horizons pass)
        assert aborted and (f.markers_removed or now < NOW + 1000)
    # Each key once at most among the records that count as plain (those of
    # undecided transactions only go when a later plain record has their key).
    plain = [r.key for b in read_batches(out)
             if not b.is_control and (ref_txns or _Txns(b"")).of(b)[0] in ("none", "committed")
             for r in b.records()]
    assert len(set(plain)) == len(plain)
    assert f.records_kept < f.records_read  # the vectors do exercise removal
    assert f.horizons_set == sum(stamped for _, _, stamped in kept)

    # Fed back in (rebuilt batches: count < lastOffsetDelta + 1, horizons
    # not reached), nothing changes.
    again, f2 = _filter(m, out, now, txns=_native_txns(out) if aware else None)
    assert again == out
    assert f2.records_kept == f2.records_read == f.records_kept
    assert f2.horizons_set == 0


@pytest.mark.parametrize("seed", range(3))
def test_windows_ending_mid_batch_give_the_same_result(seed: int) -> None:
    rng = random.Random(100 + seed)
    buf = _random_log(seed + 10)
    whole = _native_map(buf)
    # The map filled through windows of random sizes: add_batches takes the
    # whole batches that start before the window's end.
    starts = [b.position for b in validate(buf, strict=False)]
    m = OffsetMap(1 << 20)
    pos = 0
    while pos < len(buf):
        end = min(len(buf), pos + rng.randrange(1, 700))
        new, full = m.add_batches(buf, pos, end)
        assert not full
        assert new == next((s for s in starts if s >= end), len(buf)), (pos, end)
        pos = new
    assert m.size == whole.size and m.latest_offset == whole.latest_offset
    for key, offset in _latest(buf).items():
        assert m.get(key) == offset
    one, _ = _filter(whole, buf, NOW)
    pieces, f = _filter(m, buf, NOW, window=700, rng=rng)
    assert pieces == one
    # So does the transaction scan, and the filter that uses it.
    txns = TxnRanges()
    pos = 0
    while pos < len(buf):
        pos = txns.scan(buf, pos, min(len(buf), pos + rng.randrange(1, 700)))
    txns.done()
    whole_txns = _native_txns(buf)
    assert len(txns) == len(whole_txns) and txns.open == whole_txns.open
    one, _ = _filter(_native_map(buf, txns=whole_txns), buf, NOW, txns=whole_txns)
    pieces, f = _filter(_native_map(buf, txns=txns), buf, NOW, window=700, rng=rng, txns=txns)
    assert pieces == one
    assert f.bytes_read == len(buf)


def test_rebuilt_batch_against_a_newer_map() -> None:
    """A batch already cleaned once (gaps) is filtered again by a later map."""
    b = BatchBuilder(compression=3, base_offset=100, producer_id=9, producer_epoch=1,
                     base_sequence=40)
    b.append(1000, b"a", b"1", offset_delta=0)
    b.append(1500, b"b", b"2", offset_delta=4)
    b.append(1200, b"c", b"3", offset_delta=9)
    buf = b.build()
    m = OffsetMap(1 << 16)
    m.put(b"a", 100)
    m.put(b"b", 120)  # b has a later value elsewhere
    m.put(b"c", 109)
    f = RecordFilter()
    assert f.run(m, buf, 0, len(buf), NOW, NOW + RETENTION) == len(buf)
    out = f.take()
    (info,) = validate(out, strict=False)
    (batch,) = list(read_batches(out))
    assert (batch.base_offset, batch.last_offset_delta, batch.record_count) == (100, 9, 2)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 1, 40)
    assert batch.compression == 3 and batch.first_timestamp == 1000
    assert batch.max_timestamp == 1200  # b's 1500 went with it
    assert [(r.offset, r.key) for r in batch.records()] == [(100, b"a"), (109, b"c")]


@pytest.mark.parametrize("codec", [0, 3])
def test_a_tombstone_lives_until_the_horizon_its_first_clean_gave_it(codec: int) -> None:
    """KIP-534 over three cleans of one batch (a tombstone, a value, a tombstone
    of a key written again later): the first gives the batch a delete horizon
    and keeps its tombstone, whose timestamp lies far below the horizon (a
    timestamp delta that needs more bytes, re-encoded); one just before the
    horizon copies it as it is; one at the horizon drops the tombstone and
    keeps the value under the same horizon."""
    b = BatchBuilder(compression=codec, base_offset=10)
    b.append(NOW - 86_400_000, b"gone", None, [("h", b"x")])
    b.append(NOW - 1, b"kept", b"value")
    b.append(NOW - 2, b"later", None, offset_delta=5)
    buf = b.build()
    m = OffsetMap(1 << 16)
    m.add_batches(buf, 0, len(buf))
    m.put(b"later", 99)  # written again after this batch: its tombstone goes now

    def clean(data: bytes, now: int) -> tuple[bytes, RecordFilter]:
        f = RecordFilter()
        assert f.run(m, data, 0, len(data), now, now + RETENTION) == len(data)
        return bytes(f.take()), f

    first, f = clean(buf, NOW)
    assert f.horizons_set == 1
    (batch,) = read_batches(first)
    assert batch.has_delete_horizon and batch.first_timestamp == NOW + RETENTION
    assert batch.compression == codec and batch.last_offset_delta == 5
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in batch.records()] == [
        (10, b"gone", None, NOW - 86_400_000, [("h", b"x")]), (11, b"kept", b"value", NOW - 1, [])]
    assert batch.max_timestamp == NOW - 1
    validate(first, strict=False)

    second, f = clean(first, NOW + RETENTION - 1)
    assert second == first and f.horizons_set == 0

    third, f = clean(first, NOW + RETENTION)
    (batch,) = read_batches(third)
    assert batch.has_delete_horizon and batch.first_timestamp == NOW + RETENTION
    assert [(r.offset, r.key, r.value, r.timestamp) for r in batch.records()] == [
        (11, b"kept", b"value", NOW - 1)]
    assert f.horizons_set == 0


def test_a_horizon_before_the_clean_is_refused() -> None:
    f = RecordFilter()
    with pytest.raises(ValueError, match="delete horizon"):
        f.run(OffsetMap(1 << 16), b"", 0, 0, NOW, NOW - 1)


def test_stop_offset_and_unknown_keys() -> None:
    buf = _random_log(42, batches=60, codecs=(0, 2))
    batches = list(read_batches(buf))
    stop = batches[30].base_offset
    m = OffsetMap(1 << 20)
    pos, full = m.add_batches(buf, 0, len(buf), stop)
    assert not full
    assert pos == batches[30].position  # stopped at the first batch based at stop
    assert m.latest_offset == batches[29].base_offset + batches[29].last_offset_delta
    latest = _latest(buf, stop)
    assert m.size == len(latest)
    # Keys past the map: kept when the map has no later offset for them.
    out, _ = _filter(m, buf, NOW - 2000)
    _check_output(buf, out, latest, NOW - 2000)
    # A stop offset inside a batch maps that batch whole (its base is below).
    i = next(i for i, b in enumerate(batches) if b.last_offset_delta > 0 and i > 2)
    m2 = OffsetMap(1 << 20)
    pos, _ = m2.add_batches(buf, 0, len(buf), batches[i].base_offset + 1)
    assert pos == batches[i + 1].position
    assert m2.latest_offset == batches[i].base_offset + batches[i].last_offset_delta


def test_map_grows_past_its_initial_size() -> None:
    m = OffsetMap(1 << 22, initial_slots=16)
    assert m.memory == 16 * SLOT
    for i in range(20_000):
        m.put(b"key-%d" % i, 10 + i)
    for i in range(20_000):
        m.put(b"key-%d" % i, 100_000 + i if i % 2 else i)  # a lower offset never wins
    assert m.size == 20_000
    assert m.memory >= 20_000 * SLOT
    assert m.memory <= 1 << 22
    for i in range(20_000):
        assert m.get(b"key-%d" % i) == (100_000 + i if i % 2 else 10 + i)
    assert m.get(b"key-20000") == -1
    m.clear()
    assert m.size == 0 and m.get(b"key-1") == -1 and m.latest_offset == -1


def test_map_reports_full_at_capacity() -> None:
    m = OffsetMap(16 * SLOT)  # 16 slots, 14 keys at 0.9
    assert m.capacity == 14
    buf = bytearray()
    positions = []
    for i in range(10):  # 10 batches of 3 distinct keys each
        positions.append(len(buf))
        b = BatchBuilder(base_offset=3 * i, compression=i % 2)
        for k in range(3):
            b.append(1, b"k%d" % (3 * i + k), b"v")
        buf += b.build()
    pos, full = m.add_batches(buf, 0, len(buf))
    # 4 batches (12 keys) fit; the 5th (3 more) would pass 14.
    assert full and pos == positions[4]
    assert m.size == 12 and m.latest_offset == 11
    # The next pass goes on from there with an empty map.
    m.clear()
    pos, full = m.add_batches(buf, pos, len(buf))
    assert full and pos == positions[8] and m.latest_offset == 23
    m.put(b"x1", 1)
    m.put(b"x2", 2)
    with pytest.raises(OverflowError):
        m.put(b"x3", 3)
    assert m.get(b"x1") == 1 and m.get(b"x3") == -1
    with pytest.raises(ValueError):
        OffsetMap(16 * SLOT - 1)


def test_full_map_at_load_factor_one_still_answers() -> None:
    """``log.cleaner.io.buffer.load.factor`` = 1.0 is a valid setting; a map
    filled to its capacity must still answer for a key it does not hold (the
    record filter asks for every key of the clean section).  Run in a child
    process: the lookup of a missing key in a table with no empty slot never
    ends (linear probing without a bound)."""
    code = (
        "from pylog._native.cleaner import OffsetMap\n"
        "m = OffsetMap(16 * 24, 1.0)\n"
        "for i in range(m.capacity):\n"
        "    m.put(b'k%d' % i, i)\n"
        "assert m.get(b'missing') == -1\n"
        "assert m.get(b'k3') == 3\n"
    )
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("OffsetMap.get of a missing key hangs once a load-factor-1.0 map is full")
    assert proc.returncode == 0, proc.stderr.decode()


def _txn_batch(offset: int, pid: int, key: bytes, value: bytes | None) -> bytes:
    b = BatchBuilder(base_offset=offset, producer_id=pid, producer_epoch=0, base_sequence=0,
                     is_transactional=True)
    b.append(NOW - 10_000, key, value)
    return b.build()


def test_transactions_over_three_cleans() -> None:
    """A committed transaction whose record a later one replaces: the first
    clean drops the record and gives the COMMIT marker a delete horizon, one
    at the horizon drops the marker.  An aborted transaction: its batch goes
    at once and its ABORT marker stays.  An open one: its record stays, out
    of the map (it removes nothing before it)."""
    log = b"".join([
        _txn_batch(0, 7, b"k", b"committed-1"), _marker(1, 7, True, NOW - 9_000),
        _txn_batch(2, 8, b"k", b"aborted"), _marker(3, 8, False, NOW - 8_000),
        _txn_batch(4, 7, b"k", b"committed-2"), _marker(5, 7, True, NOW - 7_000),
        _txn_batch(6, 9, b"k", b"open"),
    ])

    def clean(data: bytes, now: int) -> tuple[bytes, RecordFilter]:
        txns = _native_txns(data)
        assert txns.lookup(9, 6) == "undecided" and txns.open == 1
        f = RecordFilter()
        m = _native_map(data, txns=txns)
        assert m.get(b"k") == 4  # the open transaction's record is not mapped
        assert f.run(m, data, 0, len(data), now, now + RETENTION, txns=txns) == len(data)
        return bytes(f.take()), f

    first, f = clean(log, NOW)
    assert (f.aborted_batches_removed, f.markers_removed, f.horizons_set) == (1, 0, 1)
    batches = list(read_batches(first))
    assert [(b.base_offset, b.is_control, b.has_delete_horizon) for b in batches] == [
        (1, True, True), (3, True, False), (4, False, False), (5, True, False), (6, False, False)]
    assert batches[0].first_timestamp == NOW + RETENTION
    assert next(iter(batches[0].records())).timestamp == NOW - 9_000
    validate(first, strict=False)

    second, f = clean(first, NOW + RETENTION - 1)
    assert second == first and f.markers_removed == 0

    third, f = clean(first, NOW + RETENTION)
    assert f.markers_removed == 1
    assert [b.base_offset for b in read_batches(third)] == [3, 4, 5, 6]


def test_transaction_scan_with_many_producers_open_at_once() -> None:
    """Hundreds of producers with a transaction open together, ended in a
    random order (the open table grows and moves entries back on delete):
    the scan agrees with the reference for every batch."""
    rng = random.Random(7)
    pids = list(range(10_000, 10_600))
    chunks, offset, open_pids = [], 0, []
    for pid in pids:
        chunks.append(_txn_batch(offset, pid, b"k%d" % pid, b"v"))
        offset += 1
        open_pids.append(pid)
    rng.shuffle(open_pids)
    for pid in open_pids[:450]:
        if rng.random() < 0.5:
            chunks.append(_txn_batch(offset, pid, b"again", b"v"))
            offset += 1
        chunks.append(_marker(offset, pid, rng.random() < 0.5, NOW))
        offset += 1
    log = b"".join(chunks)
    txns, ref = _native_txns(log), _Txns(log)
    assert (len(txns), txns.open) == (len(ref.ranges), ref.open) == (450, 150)
    for batch in read_batches(log):
        if not batch.is_control:
            assert txns.lookup(batch.producer_id, batch.base_offset) == ref.of(batch)[0]


@pytest.mark.parametrize("seed", range(4))
def test_the_map_stops_before_a_transaction_still_open(seed: int) -> None:
    """A transaction with no marker in the log (still open): the map ends
    before its first batch (what lies past it is not clean until it ends),
    and the filter removes its records only where a mapped record of the key
    is later."""
    buf = _random_log(seed, leave_open=True)
    ref = _Txns(buf)
    txns = _native_txns(buf)
    assert txns.open == ref.open > 0
    m = _native_map(buf, txns=txns)
    assert m.undecided
    batches = list(read_batches(buf))
    first_open = next(i for i, b in enumerate(batches)
                      if not b.is_control and ref.of(b)[0] == "undecided")
    if first_open:
        last = batches[first_open - 1]
        assert m.latest_offset == last.base_offset + last.last_offset_delta
    latest = _latest(buf, txns=ref)
    assert m.size == len(latest)
    assert all(m.get(key) == offset for key, offset in latest.items())
    out, _ = _filter(m, buf, NOW, txns=txns)
    _check_output(buf, out, latest, NOW, ref)
