"""Java-properties text (``server.properties``, ``zookeeper.properties``) as a dict.

A leaf module, so that packages below the broker (pylog.zk) read the same
files the same way as pylog.server.config does.
"""

from __future__ import annotations


class PropertiesError(ValueError):
    """A line that is not ``key=value`` (or ``key: value``)."""


def read_properties(text: str, source: str = "properties") -> dict[str, str]:
    """Java-properties-style ``key=value`` (or ``key: value``) lines; # and ! comments."""
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise PropertiesError(f"{source}:{lineno}: expected key=value, got {line!r}")
        out[line[:sep].strip()] = line[sep + 1:].strip()
    return out
