"""Fixtures shared by every test directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

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
