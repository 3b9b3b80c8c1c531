"""A real broker (with metrics.listener on) for the tool tests, and a runner for
``pylog <tool> ...`` as a subprocess, the way an operator runs it."""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

READY = "pylog broker: node"
START_TIMEOUT_S = 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ToolBroker:
    proc: subprocess.Popen
    bootstrap: str
    metrics_url: str


def _start(log_dir: Path) -> ToolBroker:
    port, metrics_port = free_port(), free_port()
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    args = [sys.executable, "-m", "pylog", "broker",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={log_dir}",
            "--override", f"metrics.listener={metrics_url}",
            # Groups join without the 3 s initial delay: the tests are short.
            "--override", "group.initial.rebalance.delay.ms=0"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = []
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.2)[0]:
            line = proc.stdout.readline()
            if not line:
                break
            output.append(line)
            if line.startswith(READY) and "listening on" in line:
                return ToolBroker(proc, f"127.0.0.1:{port}", metrics_url)
        elif proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError("broker did not start:\n" + "".join(output))


@pytest.fixture(scope="session")
def tool_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolBroker]:
    b = _start(tmp_path_factory.mktemp("tools-broker"))
    yield b
    if b.proc.poll() is None:
        b.proc.send_signal(signal.SIGTERM)
        try:
            b.proc.wait(20)
        except subprocess.TimeoutExpired:
            b.proc.kill()


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
