"""The ``pylog`` console command, run as a user runs it."""

import shutil
import subprocess
import sys

from pylog import __version__


def _pylog(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("pylog")
    cmd = [exe] if exe else [sys.executable, "-m", "pylog"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=60)


def test_version() -> None:
    out = _pylog("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"pylog {__version__}"


def test_help_lists_commands() -> None:
    out = _pylog("--help")
    assert out.returncode == 0
    assert "broker" in out.stdout
    assert "info" in out.stdout


def test_info_names_crc_implementation() -> None:
    out = _pylog("info")
    assert out.returncode == 0, out.stderr
    assert "crc32c:" in out.stdout


def test_unknown_command_fails_cleanly() -> None:
    out = _pylog("no-such-command")
    assert out.returncode == 2
    assert "invalid choice" in out.stderr
