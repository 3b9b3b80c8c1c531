"""spark_bench pieces that need neither Spark nor a broker: grid, histograms, tuner, report."""

from __future__ import annotations

import json
import math
import random
import re

import pytest

pytest.importorskip("hdrh")

from pylog import histo  # noqa: E402
from spark_bench import recommend, report  # noqa: E402
from spark_bench.grid import GridError, client_config, parse_grid  # noqa: E402
from spark_bench.task import StatsWindows, make_payloads  # noqa: E402

# ------------------------------------------------------------------------------------- grid


def test_grid_cells_and_defaults() -> None:
    grid = parse_grid(["batch.size=16384,131072", "linger.ms=0,5", "acks=0,1,-1"])
    cells = grid.cells()
    assert len(cells) == len(grid) == 12
    assert {c["acks"] for c in cells} == {"0", "1", "all"}
    # Unvaried core settings are filled in, so every results row states them.
    assert all(c["compression.type"] == "none" and c["record.size"] == 100 for c in cells)
    conf = client_config(cells[0])
    assert "record.size" not in conf and conf["batch.size"] == 16384


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (["bogus.key=1"], "unknown setting"),
        (["batch.size="], "empty"),
        (["batch.size=1,,2"], "empty"),
        (["batch.size=big"], "not an integer"),
        (["batch.size=0"], "below the minimum"),
        (["acks=2"], "not one of"),
        (["linger.ms=-1"], "below the minimum"),
        (["compression.type=brotli"], "not one of"),
        (["batch.size"], "expected key=value"),
        (["acks=1", "acks=0"], "more than once"),
    ],
)
def test_grid_errors(spec: list[str], message: str) -> None:
    with pytest.raises(GridError, match=message):
        parse_grid(spec)


# ------------------------------------------------------------------------------- histograms


def test_record_many_matches_record_value() -> None:
    rng = random.Random(7)
    values = [rng.randint(1, 5000) for _ in range(3000)]
    values += [int(rng.lognormvariate(8, 2)) + 1 for _ in range(3000)]
    values += [histo.HIGHEST_US]
    bulk, one = histo.new_histogram(), histo.new_histogram()
    histo.record_many(bulk, values)
    for v in values:
        one.record_value(v)
    assert list(bulk.counts) == list(one.counts)
    assert (bulk.total_count, bulk.min_value, bulk.max_value) == (
        one.total_count, one.min_value, one.max_value)


def test_merged_task_histograms_equal_one_histogram() -> None:
    rng = random.Random(1)
    tasks = [[int(rng.expovariate(1 / (200 * (t + 1)))) + 1 for _ in range(5000)]
             for t in range(4)]
    encoded = []
    for values in tasks:
        h = histo.new_histogram()
        histo.record_many(h, values)
        encoded.append(histo.encode(h))
    merged = histo.merge_encoded(encoded)
    whole = histo.new_histogram()
    for values in tasks:
        for v in values:
            whole.record_value(v)
    assert merged.get_total_count() == sum(map(len, tasks))
    for p in (50, 90, 95, 99, 99.9, 100):
        assert merged.get_value_at_percentile(p) == whole.get_value_at_percentile(p)
    assert histo.percentiles_ms(merged) == histo.percentiles_ms(whole)
    pct = histo.percentiles_ms(merged)
    assert pct["p50"] <= pct["p95"] <= pct["p99"] <= pct["p99_9"] <= pct["max"]


def test_percentile_curve_monotonic() -> None:
    h = histo.new_histogram()
    histo.record_many(h, list(range(1, 100_001)))
    curve = histo.percentile_curve(h)
    assert curve[0][0] == 0.0 and curve[-1][0] == 100.0
    assert all(a[1] <= b[1] for a, b in zip(curve, curve[1:], strict=False))


def test_stats_windows_weighting() -> None:
    stats = StatsWindows("t")
    for avg, cnt, p99 in ((100, 1, 150), (400, 3, 900)):
        stats(json.dumps({
            "txmsgs": 5,
            "topics": {"t": {"batchsize": {"avg": avg, "cnt": cnt, "p99": p99}}},
            "brokers": {"b": {"nodeid": 1, "rtt": {"avg": 2000, "cnt": 1, "p99": 3000}},
                        "boot": {"nodeid": -1, "rtt": {"avg": 9e9, "cnt": 1, "p99": 9e9}}},
        }))
    summary = stats.summary()
    assert summary["batchsize_avg"] == pytest.approx(325.0)
    assert summary["batchsize_p99"] == 900
    assert summary["rtt_avg_ms"] == pytest.approx(2.0)
    assert math.isnan(summary["int_latency_avg_ms"])


def test_payload_pool() -> None:
    import zlib

    rand = make_payloads(1000, 4, "random", seed=1)
    text = make_payloads(1000, 4, "text", seed=1)
    assert all(len(p) == 1000 for p in rand + text)
    assert len(set(rand)) == 4
    assert len(zlib.compress(text[0])) < 0.7 * len(zlib.compress(rand[0]))


# ---------------------------------------------------------------------------- tuner & report


def synthetic_rows() -> list[dict]:
    rows = []
    data = [  # batch.size, linger.ms, acks, MB/s, p99 ms, errors
        (16384, 0, "1", 10.0, 2.0, 0),
        (16384, 5, "1", 20.0, 4.0, 0),
        (131072, 0, "1", 15.0, 5.0, 0),   # dominated by (20, 4)
        (131072, 5, "1", 30.0, 9.0, 0),
        (16384, 0, "all", 8.0, 3.0, 0),   # dominated by (10, 2)
        (16384, 5, "all", 35.0, 20.0, 0),
        (131072, 0, "all", 50.0, 4.5, 3),  # errors: excluded unless allowed
        (131072, 5, "all", 30.0, 12.0, 0),  # dominated by (30, 9)
    ]
    for i, (b, lg, acks, mbs, p99, errors) in enumerate(data):
        h = histo.new_histogram()
        histo.record_many(h, [int(p99 * 500), int(p99 * 1000)] * 50)
        rows.append({
            "cell": i, "batch.size": b, "linger.ms": lg, "acks": acks,
            "compression.type": "none", "record.size": 100, "records": 1000,
            "seconds": 1.0, "records_per_s": mbs * 1e4, "mb_per_s": mbs,
            "p50_ms": p99 / 2, "p95_ms": p99, "p99_ms": p99, "p99_9_ms": p99, "max_ms": p99,
            "errors": errors, "client_bound": i == 3, "hist": histo.encode(h),
        })
    return rows


def test_recommend_best_within_bound() -> None:
    rows = synthetic_rows()
    result = recommend.recommend(rows, 10.0)
    assert result["best"]["cell"] == 3 and result["best"]["mb_per_s"] == 30.0
    assert recommend.recommend(rows, 4.0)["best"]["cell"] == 1
    assert recommend.recommend(rows, 1.0)["best"] is None
    # With errors allowed the 50 MB/s cell (p99 4.5) wins under 5 ms.
    assert recommend.recommend(rows, 5.0, allow_errors=True)["best"]["cell"] == 6
    assert recommend.recommend(rows, 5.0)["best"]["cell"] == 1
    text = recommend.format_recommendation(result, "mb_per_s")
    assert "batch.size = 131072" in text and "Pareto front" in text


def test_pareto_front() -> None:
    rows = [r for r in synthetic_rows() if not r["errors"]]
    front = recommend.pareto_front(rows)
    assert [r["cell"] for r in front] == [0, 1, 3, 5]
    # Brute force: a cell is on the front iff no other cell is at least as good on both axes
    # and strictly better on one.
    for r in rows:
        dominated = any(
            o["mb_per_s"] >= r["mb_per_s"] and o["p99_ms"] <= r["p99_ms"]
            and (o["mb_per_s"] > r["mb_per_s"] or o["p99_ms"] < r["p99_ms"]) for o in rows)
        assert dominated == (r not in front)


def test_report_self_contained(tmp_path) -> None:
    page = report.render_report(synthetic_rows(), {"topic": "t", "tasks": 2})
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert "http://" not in page and "https://" not in page
    assert "<script src" not in page and "<link" not in page
    # scatter, 2 acks x 2 heat maps, percentile plot
    assert page.count("<svg") >= 6
    assert page.count("<circle") >= 8
    assert "<table" in page and page.count("<tr>") == 1 + 8
    assert "Pareto front" in page and "percentile" in page
