"""``python tests/node_main.py broker ...``: ``python -m pylog`` with one
addition for tests, a SIGUSR1 handler that prints the stack of every asyncio
task to stderr.  tests/node_cluster.py starts its nodes so and sends SIGUSR1
to a node that does not stop, so the failure shows where it waits (py-spy
shows threads, not coroutines)."""

from __future__ import annotations

import asyncio
import signal
import sys
from types import FrameType


def dump_tasks(signum: int, frame: FrameType | None) -> None:
    loop = asyncio._get_running_loop()  # the main thread's, while it runs
    tasks = asyncio.all_tasks(loop) if loop is not None else set()
    print(f"--- SIGUSR1: {len(tasks)} asyncio tasks ---", file=sys.stderr, flush=True)
    for task in tasks:
        print(f"{task!r}", file=sys.stderr)
        task.print_stack(file=sys.stderr)
    sys.stderr.flush()


if __name__ == "__main__":
    del sys.path[0]  # tests/: none of its modules is pylog's to import
    signal.signal(signal.SIGUSR1, dump_tasks)
    from pylog.cli import main

    raise SystemExit(main())
