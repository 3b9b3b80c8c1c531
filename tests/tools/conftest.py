"""A real broker (with metrics.listener on) for the tool tests, and a runner for
``pylog <tool> ...`` as a subprocess, the way an operator runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from broker_process import BrokerProcess, free_port


@dataclass
class ToolBroker:
    process: BrokerProcess
    bootstrap: str
    metrics_url: str


@pytest.fixture(scope="session")
def tool_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolBroker]:
    metrics_url = f"http://127.0.0.1:{free_port()}/metrics"
    b = BrokerProcess(tmp_path_factory.mktemp("tools-broker"),
                      f"metrics.listener={metrics_url}",
                      # Groups join without the 3 s initial delay: the tests are short.
                      "group.initial.rebalance.delay.ms=0").start()
    yield ToolBroker(b, b.bootstrap, metrics_url)
    b.stop()


def _pylog() -> list[str]:
    # The console script, as operators run it; `python -m pylog` where it is not on PATH.
    script = shutil.which("pylog", path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-m", "pylog"]


@pytest.fixture(scope="session")
def pylog_cmd() -> list[str]:
    return _pylog()


def run_tool(*args: str, stdin: str | None = None, timeout: float = 60
             ) -> subprocess.CompletedProcess:
    return subprocess.run([*_pylog(), *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="session")
def pylog() -> object:
    """``pylog("topics", "--list", ...)`` -> CompletedProcess (text, captured)."""
    return run_tool


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name of its own for each test."""
    return "".join(c if c.isalnum() or c in "-" else "-" for c in request.node.name)[:200]
