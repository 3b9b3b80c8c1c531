"""A real sweep on a local[2] SparkSession against a real pylog broker (a subprocess)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("confluent_kafka")

from spark_helpers import topic_record_count  # noqa: E402

from pylog import histo  # noqa: E402
from spark_bench import driver, recommend, report  # noqa: E402
from spark_bench.grid import parse_grid  # noqa: E402

TASKS = 2
RECORDS = 200


@pytest.fixture(scope="module")
def sweep(spark: Any, broker: str, tmp_path_factory: pytest.TempPathFactory
          ) -> tuple[driver.SweepConfig, list[dict], list[dict]]:
    config = driver.SweepConfig(
        bootstrap=broker,
        topic="sweep",  # does not exist yet: auto-created by the tasks' Metadata requests
        grid=parse_grid(["batch.size=16384,131072", "linger.ms=0,5", "acks=1,all"]),
        tasks=TASKS,
        records_per_task=RECORDS,
        out=tmp_path_factory.mktemp("sweep"),
        master="local[2]",
        stats_interval_ms=100,
        start_margin_s=1.1,
    )
    cells, tasks = driver.run_sweep(config, spark=spark, progress=False)
    return config, cells, tasks


def test_sweep_results(sweep: tuple[driver.SweepConfig, list[dict], list[dict]],
                       broker: str) -> None:
    import pyarrow.parquet as pq

    config, _, _ = sweep
    rows = pq.read_table(config.out / "results.parquet").to_pylist()
    task_rows = pq.read_table(config.out / "tasks.parquet").to_pylist()
    assert len(rows) == 8 and len(task_rows) == 8 * TASKS
    settings = {(r["batch.size"], r["linger.ms"], r["acks"]) for r in rows}
    assert settings == {(b, lg, a) for b in (16384, 131072) for lg in (0, 5) for a in ("1", "all")}
    for r in rows:
        assert r["records"] == TASKS * RECORDS
        assert r["errors"] == 0
        assert r["bytes"] == r["records"] * r["record.size"]
        assert r["seconds"] > 0
        assert r["records_per_s"] == pytest.approx(r["records"] / r["seconds"])
        assert r["mb_per_s"] == pytest.approx(r["records"] * r["record.size"] / r["seconds"] / 1e6)
        assert 0 < r["p50_ms"] <= r["p95_ms"] <= r["p99_ms"] <= r["p99_9_ms"] <= r["max_ms"]
        assert r["max_ms"] < 60_000
        # Unthrottled: one latency sample per 16 records of each task (the first of each 16).
        assert r["latency_samples"] == TASKS * math.ceil(RECORDS / 16)
        assert histo.decode(r["hist"]).get_total_count() == r["latency_samples"]
        assert r["client_cpu_s"] > 0 and isinstance(r["client_bound"], bool)
        # The agreed wall-clock start keeps the tasks of a cell together.
        assert r["start_skew_s"] < 0.5
        assert r["spark_overhead_s"] > 0
        # librdkafka's statistics windows fill in against pylog (one more window is awaited
        # after the flush, so even a cell shorter than statistics.interval.ms has them).
        for column in ("rtt_avg_ms", "rtt_p99_ms", "int_latency_avg_ms", "batchsize_avg",
                       "batchcnt_avg"):
            assert r[column] > 0, column
        assert r["rtt_avg_ms"] < 60_000
    for t in task_rows:
        assert t["records"] == RECORDS and t["role"] == "producer"
    # Every record sent is in the topic, none twice.
    assert topic_record_count(broker, "sweep") == 8 * TASKS * RECORDS


def test_sweep_recommend_and_report(sweep: tuple[driver.SweepConfig, list[dict], list[dict]],
                                    tmp_path: Path) -> None:
    config, cells, _ = sweep
    result = recommend.recommend(recommend.load_results(config.out), max_p99_ms=1e9)
    assert result["best"]["mb_per_s"] == max(c["mb_per_s"] for c in cells)
    output = tmp_path / "report.html"
    report.write_report(config.out, output)
    page = output.read_text()
    assert page.count("<svg") >= 6 and "<table" in page


def test_e2e_consumers(spark: Any, broker: str, tmp_path: Path) -> None:
    config = driver.SweepConfig(
        bootstrap=broker, topic="e2e", grid=parse_grid(["linger.ms=1"]), tasks=1,
        records_per_task=300, out=tmp_path, master="local[2]", e2e=True, e2e_tasks=1,
        start_margin_s=1.1, target_rate=1000, stats_interval_ms=100,
    )
    cells, tasks = driver.run_sweep(config, spark=spark, progress=False)
    (cell,) = cells
    assert cell["records"] == 300
    # Open loop (--target-rate): every record is timed from its intended send time.
    assert cell["latency_samples"] == 300
    assert histo.decode(cell["hist"]).get_total_count() == 300
    assert cell["seconds"] == pytest.approx(0.3, abs=0.2)
    assert 0 < cell["p50_ms"] <= cell["p99_ms"] <= cell["max_ms"] < 60_000
    assert cell["e2e_records"] == 300
    assert 0 <= cell["e2e_p50_ms"] <= cell["e2e_p99_ms"] <= cell["e2e_max_ms"] < 60_000
    assert sorted(t["role"] for t in tasks) == ["consumer", "producer"]
    assert topic_record_count(broker, "e2e") == 300
