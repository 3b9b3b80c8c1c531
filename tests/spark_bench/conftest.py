"""Fixtures for the spark_bench tests: a real pylog broker (a subprocess, one per test module)
and one local[2] SparkSession.

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
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address of a ``pylog broker`` subprocess (topics auto-created on Metadata,
    its default); Spark workers connect to it over loopback like to any broker."""
    pytest.importorskip("confluent_kafka")
    from broker_process import BrokerProcess

    process = BrokerProcess(tmp_path_factory.mktemp("spark-bench-broker")).start()
    try:
        yield process.bootstrap
    finally:
        process.stop()


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("pyspark")
    if not java_available():
        pytest.skip("no Java runtime for PySpark")
    from spark_bench import driver

    session = driver.make_session("local[2]", tmp_path_factory.mktemp("spark"))
    yield session
    session.stop()
