"""Fixtures that run the real broker (``python -m pylog broker``) as a subprocess."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

READY = "pylog broker: node"
START_TIMEOUT_S = 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerProcess:
    """One broker node process; ``bootstrap`` is ``host:port``."""

    def __init__(self, log_dir: Path, *overrides: str, port: int | None = None,
                 config: Path | None = None) -> None:
        self.log_dir = log_dir
        self.config = config
        self.port = port or free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.overrides = overrides
        self.proc: subprocess.Popen | None = None
        self.output: list[str] = []

    def start(self) -> BrokerProcess:
        args = [sys.executable, "-m", "pylog", "broker",
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={self.log_dir}"]
        if self.config is not None:
            args += ["--config", str(self.config)]
        for item in self.overrides:
            args += ["--override", item]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                if not line:
                    break
                self.output.append(line)
                if line.startswith(READY) and "listening on" in line:
                    return self
            elif self.proc.poll() is not None:
                break
        self.kill()
        raise RuntimeError("broker did not start:\n" + "".join(self.output)
                           + (self.proc.stdout.read() if self.proc.stdout else ""))

    def stop(self, timeout: float = 20) -> int:
        """SIGTERM and wait: the clean shutdown path."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=timeout)
            self.output.append(out or "")
        except subprocess.TimeoutExpired:
            self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by the tests that only need default settings."""
    b = BrokerProcess(tmp_path_factory.mktemp("broker-data")).start()
    yield b
    b.stop()


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator:
    """Start brokers with extra overrides; each is stopped at the end of the test."""
    started: list[BrokerProcess] = []

    def start(*overrides: str, log_dir: Path | None = None, port: int | None = None,
              config: Path | None = None) -> BrokerProcess:
        b = BrokerProcess(log_dir or tmp_path / f"data-{len(started)}", *overrides,
                          port=port, config=config).start()
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name of its own for each test (auto-created on first use)."""
    name = request.node.name
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:200]
