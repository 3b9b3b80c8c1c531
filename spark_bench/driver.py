"""Sweep driver: pre-flight checks, one barrier stage per grid cell, merging, parquet output."""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pylog import histo
from spark_bench.grid import CORE_KEYS, Grid


class BenchError(Exception):
    """A condition the user must fix; shown as one line, exit status 2."""


@dataclass
class SweepConfig:
    bootstrap: str
    topic: str
    grid: Grid
    tasks: int
    out: Path
    records_per_task: int | None = None
    duration_s: float | None = None
    target_rate: float | None = None  # records/s of the whole cell, split evenly over tasks
    warmup_s: float = 0.0
    master: str = "local[*]"
    payload: str = "random"
    stats_interval_ms: int = 1000
    poll_every: int = 64
    sample_every: int = 16  # unthrottled: one latency sample (delivery callback) per K records
    client_bound_threshold: float = 0.8
    start_margin_s: float = 1.2
    e2e: bool = False
    e2e_tasks: int = 1
    e2e_idle_s: float = 5.0
    seed: int = 0
    client_config: dict[str, str] = field(default_factory=dict)
    spark_conf: dict[str, str] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        data = asdict(self)
        data["grid"] = self.grid.axes
        data["out"] = str(self.out)
        return data


# --------------------------------------------------------------------------- pre-flight checks


def check_java(env: dict[str, str] | None = None) -> str:
    """Path of the java binary PySpark will use; BenchError if there is none."""
    env = dict(os.environ) if env is None else env
    java_home = env.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        raise BenchError(
            f"JAVA_HOME={java_home} has no bin/java; PySpark needs a Java 17+ runtime "
            "(install one, e.g. apt-get install openjdk-17-jre-headless, or fix JAVA_HOME)"
        )
    found = shutil.which("java", path=env.get("PATH", ""))
    if not found:
        raise BenchError(
            "Java not found: no `java` on PATH and JAVA_HOME is unset; PySpark needs a Java 17+ "
            "runtime (install one, e.g. apt-get install openjdk-17-jre-headless, or set JAVA_HOME)"
        )
    return found


def _quiet_logger() -> logging.Logger:
    logger = logging.getLogger("spark_bench.preflight")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


def check_broker(bootstrap: str, timeout_s: float = 5.0) -> int:
    """A short metadata request; returns the number of brokers, BenchError if unreachable."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({
        "bootstrap.servers": bootstrap,
        "logger": _quiet_logger(),  # librdkafka's own connect-failure lines would be noise
        "error_cb": lambda _err: None,
        "socket.connection.setup.timeout.ms": int(timeout_s * 1000),
    })
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise BenchError(
            f"broker {bootstrap} unreachable: no metadata within {timeout_s:g} s ({exc.args[0]})"
        ) from None
    if not metadata.brokers:
        raise BenchError(f"broker {bootstrap} returned metadata without brokers")
    return len(metadata.brokers)


def local_slots(master: str) -> int | None:
    """Task slots of a ``local[...]`` master (None for cluster masters)."""
    if master == "local":
        return 1
    if master.startswith("local[") and master.endswith("]"):
        inner = master[6:-1].split(",")[0]
        return os.cpu_count() or 1 if inner == "*" else int(inner)
    return None


# --------------------------------------------------------------------------------- Spark session


_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def package_zip(directory: Path) -> Path:
    """Zip this package so executors (local or remote) import ``spark_bench.task`` from it."""
    source = Path(__file__).resolve().parent
    target = directory / "spark_bench.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(source.glob("*.py")):
            archive.write(path, f"spark_bench/{path.name}")
    return target


def make_session(
    master: str,
    workdir: Path,
    extra_conf: dict[str, str] | None = None,
    app_name: str = "spark_bench",
) -> Any:
    """A SparkSession with logging turned down and this package shipped to executors."""
    if master.startswith("local") and "SPARK_LOCAL_IP" not in os.environ:
        # Spark otherwise binds to the first non-loopback address, which may be unroutable.
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    log4j = workdir / "log4j2.properties"
    log4j.write_text(_LOG4J2)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .config("spark.executor.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        # A barrier stage waits for enough free slots; on a cluster whose executors are still
        # registering that is worth a few retries, not Spark's default 40 x 15 s.
        .config("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "2s")
        .config("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures", "15")
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    ship_package(spark)
    return spark


_SHIPPED: dict[int, Path] = {}


def ship_package(spark: Any) -> None:
    """Add this package's zip to a SparkContext once (Spark refuses a second file of the same
    name), from a directory that lives as long as the process."""
    sc = spark.sparkContext
    if id(sc) in _SHIPPED:
        return
    directory = Path(tempfile.mkdtemp(prefix="spark_bench-pkg-"))
    sc.addPyFile(str(package_zip(directory)))
    _SHIPPED[id(sc)] = directory


# ------------------------------------------------------------------------------------ progress


class Progress:
    """Cell i of n and records/s so far: ``rich`` when installed and stderr is a terminal,
    plain lines on stderr otherwise."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total = total
        self.enabled = enabled
        self.records = 0
        self.seconds = 0.0
        self._rich: Any = None
        self._task: Any = None
        if enabled and sys.stderr.isatty():
            try:
                from rich.console import Console
                from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
                from rich.progress import Progress as RichProgress
            except ImportError:
                pass
            else:
                self._rich = RichProgress(
                    TextColumn("[bold]{task.description}"),
                    BarColumn(),
                    TextColumn("{task.completed}/{task.total} cells"),
                    TextColumn("{task.fields[rate]}"),
                    TimeElapsedColumn(),
                    console=Console(stderr=True),
                )
                self._task = self._rich.add_task("sweep", total=total, rate="")
                self._rich.start()

    def _rate(self) -> str:
        if self.seconds <= 0:
            return ""
        return f"{self.records / self.seconds:,.0f} records/s so far"

    def cell_started(self, index: int, cell: dict[str, Any]) -> None:
        settings = " ".join(f"{k}={v}" for k, v in cell.items())
        if self._rich is not None:
            self._rich.update(self._task, description=f"cell {index + 1}/{self.total}")
            self._rich.console.print(f"cell {index + 1}/{self.total}: {settings}", style="dim")
        elif self.enabled:
            print(f"[spark_bench] cell {index + 1}/{self.total} {settings}", file=sys.stderr,
                  flush=True)

    def waiting(self, index: int, elapsed: float, tasks_done: int, tasks: int) -> None:
        if self._rich is None and self.enabled and elapsed >= 10 and int(elapsed) % 10 == 0:
            print(f"[spark_bench]   cell {index + 1}/{self.total} running {elapsed:.0f} s, "
                  f"{tasks_done}/{tasks} tasks done", file=sys.stderr, flush=True)

    def cell_done(self, index: int, row: dict[str, Any]) -> None:
        self.records += row["records"]
        self.seconds += row["seconds"]
        line = (f"cell {index + 1}/{self.total} done: {row['records_per_s']:,.0f} records/s, "
                f"{row['mb_per_s']:.2f} MB/s, p99 {row['p99_ms']:.2f} ms"
                + (", CLIENT-BOUND" if row["client_bound"] else "")
                + (f", {row['errors']} errors" if row["errors"] else ""))
        if self._rich is not None:
            self._rich.update(self._task, advance=1, rate=self._rate())
            self._rich.console.print(line)
        elif self.enabled:
            print(f"[spark_bench] {line}; {self._rate()}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()


# ------------------------------------------------------------------------------------- merging


def _nan_mean(values: Sequence[float]) -> float:
    good = [v for v in values if v is not None and not math.isnan(v)]
    return sum(good) / len(good) if good else float("nan")


def _nan_max(values: Sequence[float]) -> float:
    good = [v for v in values if v is not None and not math.isnan(v)]
    return max(good) if good else float("nan")


def merge_cell(
    cell_index: int,
    cell: dict[str, Any],
    task_rows: list[dict[str, Any]],
    submit_wall: float,
    done_wall: float,
    client_bound_threshold: float = 0.8,
) -> dict[str, Any]:
    """One results row from the task rows of one cell."""
    producers = [r for r in task_rows if r["role"] == "producer"]
    consumers = [r for r in task_rows if r["role"] == "consumer"]
    merged = histo.merge_encoded(r["hist"] for r in producers)
    records = sum(r["records"] for r in producers)
    nbytes = sum(r["bytes"] for r in producers)
    # The cell's window runs from the first task's start to the last task's last delivery,
    # so throughput is what the cluster sustained together, not a sum of per-task rates.
    seconds = max(r["end_wall"] for r in producers) - min(r["start_wall"] for r in producers)
    seconds = max(seconds, 1e-9)
    utils = [r["thread_cpu_s"] / max(r["run_seconds"], 1e-9) for r in producers]
    proc_utils = [r["cpu_s"] / max(r["run_seconds"], 1e-9) for r in producers]
    row: dict[str, Any] = {"cell": cell_index}
    row.update({key: cell[key] for key in CORE_KEYS})
    row.update({key: value for key, value in cell.items() if key not in CORE_KEYS})
    row["acks"] = str(row["acks"])
    row.update({
        "tasks": len(producers),
        "records": records,
        "records_total": sum(r["records_total"] for r in producers),
        "latency_samples": sum(r.get("latency_samples", r["records"]) for r in producers),
        "bytes": nbytes,
        "seconds": seconds,
        "records_per_s": records / seconds,
        "mb_per_s": nbytes / seconds / 1e6,
    })
    row.update({f"{name}_ms": value for name, value in histo.percentiles_ms(merged).items()})
    row.update({
        "errors": sum(r["errors"] for r in producers),
        "client_errors": sum(r["client_errors"] for r in producers),
        "client_cpu_s": sum(r["cpu_s"] for r in producers),
        "client_thread_cpu_s": sum(r["thread_cpu_s"] for r in producers),
        "client_cpu_util": max(utils),
        "client_process_cpu_util": max(proc_utils),
        # The Python send loop of some task was busy nearly all the time: the client, not the
        # broker, limited this cell.
        "client_bound": max(utils) >= client_bound_threshold,
        "batchsize_avg": _nan_mean([r["batchsize_avg"] for r in producers]),
        "batchsize_p99": _nan_max([r["batchsize_p99"] for r in producers]),
        "batchcnt_avg": _nan_mean([r["batchcnt_avg"] for r in producers]),
        "rtt_avg_ms": _nan_mean([r["rtt_avg_ms"] for r in producers]),
        "rtt_p99_ms": _nan_max([r["rtt_p99_ms"] for r in producers]),
        "int_latency_avg_ms": _nan_mean([r["int_latency_avg_ms"] for r in producers]),
        "int_latency_p99_ms": _nan_max([r["int_latency_p99_ms"] for r in producers]),
        "spark_overhead_s": min(r["first_send_wall"] for r in producers) - submit_wall,
        # How far apart the tasks really started (should be ~ms with the agreed start).
        "start_skew_s": max(r["first_send_wall"] for r in producers)
        - min(r["first_send_wall"] for r in producers),
        "stage_seconds": done_wall - submit_wall,
        "hist": histo.encode(merged),
    })
    if consumers:
        e2e = histo.merge_encoded(r["hist"] for r in consumers)
        row["e2e_records"] = sum(r["records"] for r in consumers)
        row.update({f"e2e_{k}_ms": v for k, v in histo.percentiles_ms(e2e).items()})
        row["e2e_hist"] = histo.encode(e2e)
    return row


# ----------------------------------------------------------------------------------- the sweep


def _start_offsets(bootstrap: str, topic: str, client_config: dict[str, str]) -> dict[int, int]:
    """High watermark of every partition (creating the topic via a producer's metadata request
    when it does not exist yet), so e2e consumers read exactly this cell's records."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    quiet = {"logger": _quiet_logger(), **client_config}
    producer = Producer({"bootstrap.servers": bootstrap, **quiet})
    producer.list_topics(topic, timeout=10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark_bench-offsets",
                         **quiet})
    try:
        for _ in range(50):
            meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
            if meta is not None and meta.partitions and meta.error is None:
                break
            time.sleep(0.1)
        else:
            raise BenchError(f"topic {topic} has no partitions on {bootstrap}")
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in sorted(meta.partitions)
        }
    finally:
        consumer.close()


def _task_spec(config: SweepConfig, index: int, cell: dict[str, Any]) -> dict[str, Any]:
    return {
        "bootstrap": config.bootstrap,
        "topic": config.topic,
        "cell": cell,
        "cell_index": index,
        "tasks": config.tasks,
        "records_per_task": config.records_per_task,
        "duration_s": config.duration_s,
        "rate_per_task": config.target_rate / config.tasks if config.target_rate else None,
        "warmup_s": config.warmup_s,
        "payload": config.payload,
        "stats_interval_ms": config.stats_interval_ms,
        "poll_every": config.poll_every,
        "sample_every": config.sample_every,
        "seed": config.seed + index,
        "client_config": config.client_config,
        "start_margin_s": config.start_margin_s,
    }


def run_cell(spark: Any, config: SweepConfig, index: int, cell: dict[str, Any],
             on_wait: Callable[[float, int, int], None] | None = None
             ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run one cell as one barrier stage; returns (cell row, task rows)."""
    from spark_bench import task as task_module

    spec = _task_spec(config, index, cell)
    stage_tasks = config.tasks
    if config.e2e:
        spec["e2e_tasks"] = config.e2e_tasks
        spec["e2e_start_offsets"] = _start_offsets(config.bootstrap, config.topic,
                                                   config.client_config)
        spec["e2e_expected"] = (config.records_per_task * config.tasks
                                if config.records_per_task else None)
        spec["e2e_idle_s"] = config.e2e_idle_s
        stage_tasks += config.e2e_tasks
    sc = spark.sparkContext
    group = f"spark_bench-cell-{index}"
    sc.setJobGroup(group, f"cell {index}")
    rdd = sc.parallelize(range(stage_tasks), stage_tasks)
    staged = rdd.barrier().mapPartitions(_bind(task_module.run_partition, spec))
    result: dict[str, Any] = {}

    def collect() -> None:
        try:
            result["rows"] = staged.collect()
        except BaseException as exc:  # surfaced on the calling thread
            result["error"] = exc

    submit_wall = time.time()
    worker = threading.Thread(target=collect, daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.5)
        if on_wait is not None:
            done = 0
            for job in sc.statusTracker().getJobIdsForGroup(group):
                info = sc.statusTracker().getJobInfo(job)
                for stage in info.stageIds if info else []:
                    stage_info = sc.statusTracker().getStageInfo(stage)
                    if stage_info:
                        done += stage_info.numCompletedTasks
            on_wait(time.time() - submit_wall, done, stage_tasks)
    done_wall = time.time()
    if "error" in result:
        raise result["error"]
    rows: list[dict[str, Any]] = result["rows"]
    row = merge_cell(index, cell, rows, submit_wall, done_wall, config.client_bound_threshold)
    for task_row in rows:
        task_row.update({key: cell[key] for key in CORE_KEYS})
        task_row["acks"] = str(task_row["acks"])
    return row, rows


def _bind(func: Callable[..., Any], spec: dict[str, Any]) -> Callable[[Any], Any]:
    # A functools.partial of a module-level function pickles as a reference to
    # spark_bench.task.run_partition plus the spec dict, not as a copy of the code.
    import functools

    return functools.partial(func, spec)


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Columns that only some rows have (e.g. grid keys) are filled with nulls.
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    table = pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows])
    pq.write_table(table, path)


def run_sweep(config: SweepConfig, spark: Any | None = None, progress: bool = True
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run every cell of the grid and write results.parquet, tasks.parquet and sweep.json."""
    cells = config.grid.cells()
    slots = local_slots(config.master) if spark is None else None
    needed = config.tasks + (config.e2e_tasks if config.e2e else 0)
    if slots is not None and needed > slots:
        raise BenchError(
            f"{needed} tasks per cell need {needed} concurrent slots (barrier stage) but master "
            f"{config.master} has {slots}; lower --tasks or use local[{needed}]"
        )
    config.out.mkdir(parents=True, exist_ok=True)
    (config.out / "sweep.json").write_text(json.dumps(config.describe(), indent=2, default=str))
    owned = spark is None
    tmp = tempfile.TemporaryDirectory(prefix="spark_bench-")
    if owned:
        spark = make_session(config.master, Path(tmp.name), config.spark_conf)
    else:
        ship_package(spark)
    bar = Progress(len(cells), enabled=progress)
    cell_rows: list[dict[str, Any]] = []
    task_rows: list[dict[str, Any]] = []
    try:
        for index, cell in enumerate(cells):
            bar.cell_started(index, cell)
            row, rows = run_cell(
                spark, config, index, cell,
                on_wait=lambda elapsed, done, total, i=index: bar.waiting(i, elapsed, done, total),
            )
            cell_rows.append(row)
            task_rows.extend(rows)
            bar.cell_done(index, row)
            # Rewrite after every cell so an interrupted sweep still leaves usable results.
            write_parquet(cell_rows, config.out / "results.parquet")
            write_parquet(task_rows, config.out / "tasks.parquet")
    finally:
        bar.close()
        if owned:
            spark.stop()
        tmp.cleanup()
    return cell_rows, task_rows
