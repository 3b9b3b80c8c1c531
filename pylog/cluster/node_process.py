"""One node of a one-host cluster: a ``python -m pylog broker`` child whose
stdout the supervisor reads line by line (its stderr, the node's log, goes
straight to the supervisor's)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence

# The node's own ready line (pylog.server.main.serve prints it once its
# listener is up): the address it listens on, the real port when the
# listener asked for port 0.
NODE_READY_LINE = re.compile(r"pylog broker: node (\d+) listening on (\S+), data in (.+)")


class NodeProcess:
    """One run of one node: started once, ended once; a restart is a new one."""

    def __init__(self, node_id: int, command: Sequence[str]) -> None:
        self.node_id = node_id
        # Its own session: a terminal's Ctrl-C reaches only the supervisor,
        # which stops the nodes in order (then ZooKeeper).  The parent-death
        # signal in the command still ends it if the supervisor is killed.
        self.proc = subprocess.Popen(list(command), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, start_new_session=True)
        assert self.proc.stdout is not None
        self._stdout = self.proc.stdout
        self.fd = self._stdout.fileno()  # kept: the selector unregisters it after close
        os.set_blocking(self.fd, False)
        self._partial = b""
        self.started_at = time.monotonic()
        self.address: str | None = None  # host:port, once ready
        self.log_dir: str | None = None
        self.eof = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def ready(self) -> bool:
        return self.address is not None

    def read_lines(self) -> list[str]:
        """The complete lines now in the pipe (after EOF, the unterminated
        rest too); notes the ready line."""
        lines: list[str] = []
        while not self.eof and not self._stdout.closed:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                self.eof = True
                if self._partial:
                    lines.append(self._partial.decode(errors="replace"))
                break
            *complete, self._partial = (self._partial + chunk).split(b"\n")
            lines += [line.decode(errors="replace") for line in complete]
        for line in lines:
            match = NODE_READY_LINE.fullmatch(line)
            if match and int(match[1]) == self.node_id and not self.ready:
                self.address, self.log_dir = match[2], match[3]
        return lines

    def poll(self) -> int | None:
        return self.proc.poll()

    def ran_for(self) -> float:
        return time.monotonic() - self.started_at

    def terminate(self) -> None:
        """SIGTERM: the node's clean (controlled) shutdown."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        """Stop reading its stdout (unregister ``fd`` from any selector first)."""
        self._stdout.close()
