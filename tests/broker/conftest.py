"""Fixtures that run the real broker (``python -m pylog broker``) as a subprocess."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import EVENT_LOOPS, BrokerProcess, safe_name


@pytest.fixture(scope="session", params=EVENT_LOOPS)
def broker(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by the tests that only need default settings; once on
    each event loop the broker runs on (uvloop, asyncio)."""
    b = BrokerProcess(tmp_path_factory.mktemp(f"broker-data-{request.param}"),
                      event_loop=request.param).start()
    yield b
    b.stop()


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator:
    """Start brokers with extra overrides; each is stopped at the end of the test."""
    started: list[BrokerProcess] = []

    def start(*overrides: str, log_dir: Path | None = None, port: int | None = None,
              config: Path | None = None, event_loop: str | None = None) -> BrokerProcess:
        b = BrokerProcess(log_dir or tmp_path / f"data-{len(started)}", *overrides,
                          port=port, config=config, event_loop=event_loop).start()
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name of its own for each test (auto-created on first use)."""
    return safe_name(request.node.name)
