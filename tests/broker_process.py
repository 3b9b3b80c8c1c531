"""The real broker (``python -m pylog broker``) as a subprocess, for every test
directory that needs one (the fixtures live in each directory's conftest)."""

from __future__ import annotations

import codecs
import contextlib
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

READY = "pylog broker: node"
START_TIMEOUT_S = 30
# The broker's event loops (PYLOG_EVENT_LOOP); the default is the first.
EVENT_LOOPS = ("uvloop", "asyncio")


def wait_for(predicate: Callable[[], object], timeout: float, what: str,
             interval: float = 0.1) -> object:
    """Poll ``predicate`` until it returns something true (returned), for
    background work; past ``timeout`` seconds an AssertionError naming
    ``what`` (a liveness bound, never a speed threshold)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(count: int, tries: int = 50) -> int:
    """The first of ``count`` consecutive free ports on 127.0.0.1 (a
    cluster's nodes listen on port, port + 1, ...)."""
    for _ in range(tries):
        first = free_port()
        if first + count - 1 > 65535:
            continue
        try:
            with contextlib.ExitStack() as stack:
                for port in range(first + 1, first + count):
                    s = stack.enter_context(socket.socket())
                    s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
    raise AssertionError(f"no {count} consecutive free ports found")


class BrokerProcess:
    """One broker node process; ``bootstrap`` is ``host:port``."""

    def __init__(self, log_dir: Path, *overrides: str, port: int | None = None,
                 config: Path | None = None, event_loop: str | None = None,
                 file_size_limit: int | None = None,
                 open_files: tuple[int, int] | None = None,
                 own_listener: bool = True, env: dict[str, str] | None = None,
                 log_file: Path | None = None, main: tuple[str, ...] = ("-m", "pylog")
                 ) -> None:
        self.log_dir = log_dir
        self.main = main  # what python runs: pylog's main, or a script around it
        self.env = env or {}  # added to the environment (PYLOG_LOG_LEVEL, ...)
        # Set: the node's stdout and stderr are appended to this file instead
        # of a pipe, so a long-running node never blocks on a pipe nobody
        # reads, and its log outlives it (restarts append to the same file).
        self.log_file = log_file
        # False: ``config`` sets listeners (on ``port``) and log.dirs itself,
        # as an operator's server.properties does.
        self.own_listener = own_listener
        # RLIMIT_FSIZE of the process: a write past it fails with EFBIG, a real
        # refusal by the kernel, as a full disk's ENOSPC (Python ignores SIGXFSZ).
        self.file_size_limit = file_size_limit
        self.open_files = open_files  # RLIMIT_NOFILE (soft, hard) it starts with
        self.event_loop = event_loop  # None: the broker's default
        self.config = config
        self.port = port or free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.overrides = overrides
        self.proc: subprocess.Popen | None = None
        self.output: list[str] = []

    def start(self) -> BrokerProcess:
        if self.log_file is not None:
            return self.launch().wait_ready()
        args = self._args()
        env = self._env()
        preexec = self._limits()
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
            env=env, preexec_fn=preexec)
        return self._wait_ready_on_pipe()

    def _args(self) -> list[str]:
        args = [sys.executable, *self.main, "broker"]
        if self.own_listener:
            args += ["--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                     "--override", f"log.dirs={self.log_dir}"]
        if self.config is not None:
            args += ["--config", str(self.config)]
        for item in self.overrides:
            args += ["--override", item]
        return args

    def _env(self) -> dict[str, str]:
        env = {**os.environ, **self.env}
        if self.event_loop is not None:
            env["PYLOG_EVENT_LOOP"] = self.event_loop
        return env

    def _limits(self) -> Callable[[], None] | None:
        limits = []
        if self.file_size_limit is not None:
            limits.append((resource.RLIMIT_FSIZE, (self.file_size_limit,) * 2))
        if self.open_files is not None:
            limits.append((resource.RLIMIT_NOFILE, self.open_files))

        def set_limits() -> None:
            for which, value in limits:
                resource.setrlimit(which, value)

        return set_limits if limits else None

    def launch(self) -> BrokerProcess:
        """With ``log_file``: start the process without waiting for it (several
        nodes start side by side; then :meth:`wait_ready` each)."""
        assert self.log_file is not None, "launch() needs a log_file"
        with open(self.log_file, "ab") as out:
            self._log_start = out.tell()
            self.proc = subprocess.Popen(self._args(), stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, env=self._env(),
                                         preexec_fn=self._limits())
        return self

    def log_text(self) -> str:
        """What this run (since :meth:`launch`) wrote to ``log_file``."""
        assert self.log_file is not None
        with open(self.log_file, "rb") as f:
            f.seek(self._log_start)
            return f.read().decode(errors="replace")

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> BrokerProcess:
        """Until the ready line is in ``log_file``; RuntimeError with the log
        (the process killed) when it exits first or does not get ready."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(line.startswith(READY) and "listening on" in line
                   for line in self.log_text().splitlines()):
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.kill()
        raise RuntimeError("broker did not start:\n" + self.log_text())

    def _wait_ready_on_pipe(self) -> BrokerProcess:
        assert self.proc is not None and self.proc.stdout is not None
        # Read from the pipe's fd, not through the text wrapper: select() sees
        # only what is still in the pipe, so lines the wrapper had already
        # buffered (start-up warnings and the ready line in one read) would
        # wait there unseen until the timeout.
        fd = self.proc.stdout.fileno()
        decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        partial = ""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                *lines, partial = (partial + decode(chunk)).split("\n")
                self.output += [line + "\n" for line in lines]
                if any(line.startswith(READY) and "listening on" in line for line in lines):
                    self.output.append(partial)  # the rest of that line comes with stop()
                    return self
            elif self.proc.poll() is not None:
                break
        self.output.append(partial)
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

    def wait_exit(self, timeout: float = 20) -> int:
        """Wait for the process to end on its own; its exit status."""
        assert self.proc is not None
        out, _ = self.proc.communicate(timeout=timeout)  # (None with a log_file)
        self.output.append(out or "")
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def rss_mib(pid: int) -> float:
    """A process's resident memory (MiB), from /proc/<pid>/status."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def safe_name(name: str, keep: str = "._-", limit: int = 200) -> str:
    """A test's node name as a topic/group name (Kafka's legal characters)."""
    return "".join(c if c.isalnum() or c in keep else "_" for c in name)[:limit]
