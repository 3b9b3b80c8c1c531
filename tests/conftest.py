"""Fixtures shared by every test directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pylog.zk.server import ZooKeeperServer

# Helper modules shared by the test directories (broker_process, kafka_wire,
# record_vectors, ...) live in tests/; subdirectory tests import them by name.
_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)


def ensure_command(command: str, package: str) -> str | None:
    """Path of ``command``, installing Debian's ``package`` first when missing.

    Tests that drive a real external program (kcat, chromium) install it the
    way CI can: as root with apt. Elsewhere they get None and say why they skip.
    """
    found = shutil.which(command)
    if found:
        return found
    if not (hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get")):
        return None
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package]
    # A fresh machine has no package lists yet: update once, then try again.
    for steps in ([install], [["apt-get", "update", "-qq"], install]):
        for step in steps:
            try:
                subprocess.run(step, env=env, capture_output=True, timeout=900, check=False)
            except subprocess.TimeoutExpired:
                return None
        found = shutil.which(command)
        if found:
            return found
    return None


@pytest.fixture(scope="session")
def system_command() -> Callable[[str, str], str | None]:
    """``system_command("kcat", "kcat")`` -> path or None (see ensure_command)."""
    return ensure_command


@pytest.fixture(scope="session")
def zookeeper_installed(system_command: Callable[[str, str], str | None]) -> None:
    """Debian's zookeeper package, installed with apt where it is missing (as
    root); the tests skip only where that cannot be done."""
    from zk_process import ZK_SERVER_SH

    from pylog.zk.server import ZOOKEEPER_JAR, ZooKeeperServerError, check_installed

    if not ZOOKEEPER_JAR.is_file():
        system_command(str(ZK_SERVER_SH), "zookeeper")
    try:
        check_installed()
    except ZooKeeperServerError as exc:
        pytest.skip(f"{exc} (and it could not be installed here)")


@pytest.fixture(scope="session")
def zk_server(zookeeper_installed: None, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[ZooKeeperServer]:
    """A real ZooKeeper server for the session (tests/zk, tests/cluster)."""
    from zk_process import start_zookeeper

    server = start_zookeeper(tmp_path_factory.mktemp("zookeeper"))
    yield server
    server.stop()
