"""Fixtures for the consumer group tests: brokers with a short initial rebalance
delay (Kafka's 3 s default would dominate every test), topics, and consumer
settings that keep rebalances quick (short heartbeat intervals)."""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

_BROKER_DIR = Path(__file__).resolve().parent.parent / "broker"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_fixtures = _load("groups_broker_fixtures", _BROKER_DIR / "conftest.py")
_wire = _load("groups_kafka_wire", _BROKER_DIR / "kafka_wire.py")
BrokerProcess = _fixtures.BrokerProcess
RawClient = _wire.RawClient

# Small enough to keep tests quick, large enough that consumers started
# together land in one first generation.
REBALANCE_DELAY_MS = 300
SESSION_TIMEOUT_MS = 6000  # group.min.session.timeout.ms: the smallest allowed
GROUP_OVERRIDES = (f"group.initial.rebalance.delay.ms={REBALANCE_DELAY_MS}",)

# librdkafka consumer settings shared by the tests.
RDKAFKA = {"session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 300,
           "enable.auto.commit": False, "auto.offset.reset": "earliest",
           "topic.metadata.refresh.interval.ms": 1000}


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
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in request.node.name)[:150]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, count: int, partitions: int, start: int = 0) -> None:
    """``count`` records with values ``start..start+count-1``, round robin over partitions."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        p.produce(topic, str(i).encode(), partition=i % partitions)
    assert p.flush(30) == 0


def wait_for(predicate: Callable[[], object], timeout: float, what: str,
             interval: float = 0.1) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
