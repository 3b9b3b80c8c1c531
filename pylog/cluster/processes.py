"""A supervisor's node processes as /proc shows them: its live children and
the ``--override`` settings on their command lines.  For whatever watches a
``pylog broker --nodes N`` from outside (the tests, the benchmarks, an
operator's script) to find node i's pid."""

from __future__ import annotations

import os


def argv_of(pid: int) -> list[str] | None:
    """A live process's command line; None once it is gone (or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rpartition(")")[2].split()[0] == "Z":
                return None
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0")[:-1]]
    except (FileNotFoundError, ProcessLookupError):
        return None


def children(ppid: int) -> dict[int, list[str]]:
    """The live child processes of ``ppid``: pid -> argv."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                state, parent = f.read().rpartition(")")[2].split()[:2]
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(parent) == ppid and state != "Z" and (argv := argv_of(int(name))):
            out[int(name)] = argv
    return out


def override_of(argv: list[str], key: str) -> str | None:
    """The last ``--override key=value`` of a pylog command line (the one that wins)."""
    found = None
    for arg, value in zip(argv, argv[1:], strict=False):
        if arg == "--override" and value.startswith(key + "="):
            found = value.partition("=")[2]
    return found
