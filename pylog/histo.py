"""HDR histogram helpers: bulk recording, merging encoded histograms, percentiles.

Latencies are recorded in microseconds with 3 significant digits. The ``hdrhistogram`` package
records one value in ~6 us of pure Python, more than a producer spends per record, so tasks
collect raw latencies in an ``array`` and fold them in bulk with numpy here
(:func:`record_many`), off the timed path or in large chunks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour: anything slower is clamped, not dropped
SIGNIFICANT_DIGITS = 3

# Percentiles written to the results, as (column suffix, percentile).
PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0),
    ("p95", 95.0),
    ("p99", 99.0),
    ("p99_9", 99.9),
)


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record_many(hist: HdrHistogram, values_us: Sequence[int] | np.ndarray) -> None:
    """Record many values at once; equivalent to ``record_value`` on each, clamped to range.

    Mirrors ``HdrHistogram._counts_index_for`` with numpy so a million values take
    milliseconds instead of seconds.
    """
    values = np.asarray(values_us, dtype=np.int64)
    if values.size == 0:
        return
    values = np.clip(values, LOWEST_US, HIGHEST_US)
    # bit_length(v | sub_bucket_mask) computed exactly via frexp (values < 2**53).
    _, exponent = np.frexp((values | hist.sub_bucket_mask).astype(np.float64))
    bucket = exponent.astype(np.int64) - hist.unit_magnitude - (
        hist.sub_bucket_half_count_magnitude + 1
    )
    sub_bucket = values >> (bucket + hist.unit_magnitude)
    index = ((bucket + 1) << hist.sub_bucket_half_count_magnitude) + (
        sub_bucket - hist.sub_bucket_half_count
    )
    binned = np.bincount(index, minlength=0)
    nonzero = np.flatnonzero(binned)
    counts = hist.counts
    for i in nonzero.tolist():
        counts[i] += int(binned[i])
    hist.total_count += int(values.size)
    hist.min_value = min(hist.min_value, int(values.min()))
    hist.max_value = max(hist.max_value, int(values.max()))


def merge_encoded(encoded: Iterable[bytes | str | None]) -> HdrHistogram:
    """Merge histograms encoded with ``HdrHistogram.encode()`` (tasks ship these)."""
    merged = new_histogram()
    for item in encoded:
        if item:
            merged.decode_and_add(item)
    return merged


def encode(hist: HdrHistogram) -> str:
    """Base64 text form (parquet-friendly string) of a histogram."""
    data = hist.encode()
    return data.decode("ascii") if isinstance(data, bytes) else data


def decode(encoded: bytes | str) -> HdrHistogram:
    hist = new_histogram()
    if encoded:
        hist.decode_and_add(encoded)
    return hist


def percentiles_ms(hist: HdrHistogram) -> dict[str, float]:
    """p50..p99.9 and max in milliseconds (NaN for an empty histogram)."""
    if hist.get_total_count() == 0:
        out = {name: float("nan") for name, _ in PERCENTILES}
        out["max"] = float("nan")
        return out
    out = {name: hist.get_value_at_percentile(p) / 1000.0 for name, p in PERCENTILES}
    # get_max_value() is the highest *equivalent* value of the top bucket; report that too so
    # max >= every percentile holds exactly.
    out["max"] = hist.get_max_value() / 1000.0
    return out


def percentile_curve(hist: HdrHistogram, max_nines: int = 5) -> list[tuple[float, float]]:
    """(percentile, latency ms) points for an HDR-style percentile plot.

    Points are spaced evenly in "nines" (log of 1/(1-p)), stopping at the percentile the data
    can support (one sample past 1-1/count), and the curve ends at the max.
    """
    total = hist.get_total_count()
    if total == 0:
        return []
    points: list[tuple[float, float]] = []
    top_nines = min(max_nines, np.log10(max(total, 1)))
    steps = max(int(top_nines * 10), 1)
    for i in range(steps + 1):
        nines = top_nines * i / steps
        pct = 100.0 * (1.0 - 10.0 ** (-nines))
        points.append((pct, hist.get_value_at_percentile(pct) / 1000.0))
    points.append((100.0, hist.get_max_value() / 1000.0))
    return points
