"""Fixtures for the consumer group tests: brokers with a short initial rebalance
delay (Kafka's 3 s default would dominate every test), topics, and consumer
settings that keep rebalances quick (short heartbeat intervals)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from broker_process import BrokerProcess, safe_name
from group_helpers import GROUP_OVERRIDES


@pytest.fixture(scope="session")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("groups-data"), *GROUP_OVERRIDES).start()
    yield b
    b.stop()


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []

    def start(*overrides: str, log_dir: Path | None = None,
              port: int | None = None) -> BrokerProcess:
        b = BrokerProcess(log_dir or tmp_path / "data", *GROUP_OVERRIDES, *overrides,
                          port=port).start()
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop()


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A topic / group name of the test's own."""
    return safe_name(request.node.name, limit=150)
