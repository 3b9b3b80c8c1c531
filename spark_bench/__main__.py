"""Command line: ``python -m spark_bench {sweep,recommend,report,mock-broker,producer-perf}``.

User errors (bad grid, no Java, unreachable broker, ...) print one ``spark_bench: error: ...``
line on stderr and exit with status 2; nothing starts a JVM before they are ruled out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

EXIT_USAGE = 2


def _fail(message: str, status: int = EXIT_USAGE) -> int:
    print(f"spark_bench: error: {message}", file=sys.stderr, flush=True)
    return status


def _positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _positive_float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{raw} must be positive")
    return value


def _non_negative_float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{raw} must not be negative")
    return value


def _key_value(raw: str) -> tuple[str, str]:
    key, sep, value = raw.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{raw!r} is not key=value")
    return key.strip(), value.strip()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m spark_bench",
        description="PySpark load generator and tuner for Kafka-protocol brokers.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    sweep = sub.add_parser("sweep", help="run a grid of producer settings as Spark stages")
    sweep.add_argument("--bootstrap-server", required=True, help="host:port[,host:port]")
    sweep.add_argument("--topic", required=True)
    sweep.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                       help="a setting and its values; repeat per setting (batch.size, "
                            "linger.ms, acks, compression.type, record.size, ...)")
    sweep.add_argument("--tasks", type=_positive_int, required=True,
                       help="producer tasks per cell (one barrier stage, started together)")
    amount = sweep.add_mutually_exclusive_group(required=True)
    amount.add_argument("--records-per-task", type=_positive_int)
    amount.add_argument("--duration", type=_positive_float, metavar="SECONDS",
                        help="measured seconds per cell (after the warm-up)")
    sweep.add_argument("--target-rate", type=_positive_float, metavar="RPS",
                       help="open-loop records/s for the whole cell (split over tasks); "
                            "default: as fast as possible")
    sweep.add_argument("--warmup-seconds", type=_non_negative_float, default=0.0)
    sweep.add_argument("--master", default="local[*]", help="Spark master URL")
    sweep.add_argument("--out", required=True, type=Path)
    sweep.add_argument("--payload", choices=["random", "text"], default="random",
                       help="random (incompressible) or text (compressible) payloads")
    sweep.add_argument("--stats-interval-ms", type=_positive_int, default=1000,
                       help="librdkafka statistics.interval.ms")
    sweep.add_argument("--poll-every", type=_positive_int, default=64,
                       help="poll(0) every K records when sending as fast as possible")
    sweep.add_argument("--sample-every", type=_positive_int, default=16, metavar="K",
                       help="without --target-rate: a latency sample (delivery callback) on "
                            "1 record in K (1: every record; callbacks cost client throughput)")
    sweep.add_argument("--client-bound-threshold", type=_positive_float, default=0.8,
                       help="flag a cell when a task's send-loop CPU / wall reaches this")
    sweep.add_argument("-X", dest="client_config", type=_key_value, action="append",
                       default=[], metavar="KEY=VALUE",
                       help="extra librdkafka setting for every client (e.g. security)")
    sweep.add_argument("--spark-conf", type=_key_value, action="append", default=[],
                       metavar="KEY=VALUE")
    sweep.add_argument("--e2e", action="store_true",
                       help="also run consumer tasks measuring now - record timestamp")
    sweep.add_argument("--e2e-tasks", type=_positive_int, default=1)
    sweep.add_argument("--seed", type=int, default=0)
    sweep.add_argument("--broker-timeout", type=_positive_float, default=5.0,
                       help="seconds for the pre-flight metadata request")
    sweep.add_argument("--quiet", action="store_true", help="no progress output")

    rec = sub.add_parser("recommend", help="best settings within a p99 bound, Pareto front")
    rec.add_argument("dir", type=Path)
    rec.add_argument("--max-p99-ms", type=_positive_float, required=True)
    rec.add_argument("--metric", choices=["records_per_s", "mb_per_s"], default="mb_per_s")
    rec.add_argument("--allow-errors", action="store_true",
                     help="consider cells that had delivery errors")
    rec.add_argument("--json", action="store_true", help="machine-readable output")

    rep = sub.add_parser("report", help="write a self-contained HTML dashboard")
    rep.add_argument("dir", type=Path)
    rep.add_argument("-o", "--output", type=Path, default=None,
                     help="HTML file (default DIR/report.html)")
    rep.add_argument("--top", type=_positive_int, default=5,
                     help="cells drawn in the percentile plot")

    mock = sub.add_parser("mock-broker",
                          help="run a librdkafka mock cluster and print its bootstrap address")
    mock.add_argument("--brokers", type=_positive_int, default=1)
    mock.add_argument("--seconds", type=_positive_float, default=None,
                      help="exit after this long (default: until interrupted)")

    perf = sub.add_parser("producer-perf",
                          help="the task loop in this process, without Spark (a baseline)")
    perf.add_argument("--bootstrap-server", required=True)
    perf.add_argument("--topic", required=True)
    perf.add_argument("--records", type=_positive_int, required=True)
    perf.add_argument("--record-size", type=_positive_int, default=100)
    perf.add_argument("--target-rate", type=_positive_float)
    perf.add_argument("--sample-every", type=_positive_int, default=16, metavar="K")
    perf.add_argument("-X", dest="client_config", type=_key_value, action="append",
                      default=[], metavar="KEY=VALUE")
    return parser


def _sweep(args: argparse.Namespace) -> int:
    from spark_bench.grid import GridError, parse_grid

    try:
        grid = parse_grid(args.grid)
    except GridError as exc:
        return _fail(str(exc))
    if args.target_rate and args.target_rate < args.tasks:
        return _fail(f"--target-rate {args.target_rate:g} is below one record/s per task")

    from spark_bench import driver

    try:
        driver.check_java()
        driver.check_broker(args.bootstrap_server, args.broker_timeout)
    except driver.BenchError as exc:
        return _fail(str(exc))
    config = driver.SweepConfig(
        bootstrap=args.bootstrap_server,
        topic=args.topic,
        grid=grid,
        tasks=args.tasks,
        out=args.out,
        records_per_task=args.records_per_task,
        duration_s=args.duration,
        target_rate=args.target_rate,
        warmup_s=args.warmup_seconds,
        master=args.master,
        payload=args.payload,
        stats_interval_ms=args.stats_interval_ms,
        poll_every=args.poll_every,
        sample_every=args.sample_every,
        client_bound_threshold=args.client_bound_threshold,
        e2e=args.e2e,
        e2e_tasks=args.e2e_tasks,
        seed=args.seed,
        client_config=dict(args.client_config),
        spark_conf=dict(args.spark_conf),
    )
    try:
        cells, _tasks = driver.run_sweep(config, progress=not args.quiet)
    except driver.BenchError as exc:
        return _fail(str(exc))
    except Exception as exc:  # a Py4J error: keep the Java stack trace off the terminal
        message = str(exc).strip().splitlines()
        first = next((line for line in message if "Exception" in line or "Error" in line),
                     message[0] if message else type(exc).__name__)
        return _fail(f"Spark job failed: {first.strip()[:500]}", status=1)
    print(f"wrote {len(cells)} cells to {config.out / 'results.parquet'} "
          f"(tasks: {config.out / 'tasks.parquet'})")
    return 0


def _recommend(args: argparse.Namespace) -> int:
    from spark_bench import recommend

    try:
        table = recommend.load_results(args.dir)
    except FileNotFoundError as exc:
        return _fail(str(exc))
    result = recommend.recommend(table, args.max_p99_ms, args.metric, args.allow_errors)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(recommend.format_recommendation(result, args.metric))
    return 0 if result["best"] is not None else 1


def _report(args: argparse.Namespace) -> int:
    from spark_bench import report

    output = args.output or args.dir / "report.html"
    try:
        report.write_report(args.dir, output, top=args.top)
    except FileNotFoundError as exc:
        return _fail(str(exc))
    print(f"wrote {output}")
    return 0


def _mock_broker(args: argparse.Namespace) -> int:
    from confluent_kafka import Producer

    # The mock cluster lives inside this client; keep it (and the process) alive.
    holder = Producer({"test.mock.num.brokers": args.brokers, "log_level": 3})
    brokers = holder.list_topics(timeout=10).brokers.values()
    print(",".join(f"{b.host}:{b.port}" for b in brokers), flush=True)
    deadline = time.monotonic() + args.seconds if args.seconds else None
    try:
        while deadline is None or time.monotonic() < deadline:
            holder.poll(0.5)
    except KeyboardInterrupt:
        pass
    return 0


def _producer_perf(args: argparse.Namespace) -> int:
    from pylog import histo
    from spark_bench import driver, task
    from spark_bench.grid import SETTINGS

    try:
        driver.check_broker(args.bootstrap_server)
    except driver.BenchError as exc:
        return _fail(str(exc))
    cell: dict[str, Any] = {k: s.default for k, s in SETTINGS.items() if not s.client_config}
    cell["record.size"] = args.record_size
    conf = dict(args.client_config)
    spec = {"bootstrap": args.bootstrap_server, "topic": args.topic, "cell": cell,
            "cell_index": 0, "tasks": 1, "records_per_task": args.records,
            "rate_per_task": args.target_rate, "sample_every": args.sample_every,
            "client_config": conf}
    row = task.run_producer(spec, 0)
    pct = histo.percentiles_ms(histo.decode(row["hist"]))
    print(f"{row['records']} records sent, {row['records_per_s']:,.0f} records/s "
          f"({row['bytes'] / row['seconds'] / 1e6:.2f} MB/s), p50 {pct['p50']:.2f} ms, "
          f"p99 {pct['p99']:.2f} ms, max {pct['max']:.2f} ms "
          f"({row['latency_samples']} latency samples), errors {row['errors']}, "
          f"cpu {row['cpu_s']:.2f} s / {row['run_seconds']:.2f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = {
        "sweep": _sweep,
        "recommend": _recommend,
        "report": _report,
        "mock-broker": _mock_broker,
        "producer-perf": _producer_perf,
    }[args.command]
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
