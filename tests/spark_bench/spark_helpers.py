"""Helpers shared by the Spark harness tests."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(home and (Path(home) / "bin" / "java").is_file()) or bool(shutil.which("java"))
