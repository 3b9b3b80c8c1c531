"""Fixtures for the spark_bench tests: a librdkafka mock cluster and one local[2] SparkSession.

``spark_bench`` lives at the repository root and is not part of the installed ``pylog``
distribution, so the root is put first on ``sys.path`` (``tests/`` is on it too, and
``tests/spark_bench`` must not shadow the real package).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import java_available

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path[:1]:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="module")
def mock_bootstrap() -> Iterator[str]:
    """Bootstrap address of a mock cluster living inside this process's holder client; Spark
    workers (separate processes) connect to it over loopback like to any broker."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    holder = confluent_kafka.Producer({"test.mock.num.brokers": 1, "log_level": 3})
    brokers = holder.list_topics(timeout=10).brokers.values()
    yield ",".join(f"{b.host}:{b.port}" for b in brokers)
    holder.flush(1)
    del holder


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("pyspark")
    if not java_available():
        pytest.skip("no Java runtime for PySpark")
    from spark_bench import driver

    session = driver.make_session("local[2]", tmp_path_factory.mktemp("spark"))
    yield session
    session.stop()
