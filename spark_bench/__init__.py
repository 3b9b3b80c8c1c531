"""PySpark load generator and tuner for Kafka-protocol brokers (DESIGN.md section 7).

Run ``python -m spark_bench --help``. Modules: :mod:`grid` (grid specs), :mod:`task` (the
per-task producer/consumer loops shipped to Spark workers), :mod:`driver` (stages, merging,
parquet), :mod:`histo` (HDR helpers), :mod:`recommend` (tuner), :mod:`report` (HTML dashboard).
"""

__all__ = ["driver", "grid", "histo", "recommend", "report", "task"]
