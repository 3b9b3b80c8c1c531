"""Replication fault soak, the long run of tests/replication/test_fault_soak.py:

    .venv/bin/python tests/soak/replication_soak.py --events 100 [--seed N] [--keep]

Three pylog nodes and ZooKeeper (Debian's package) on this host; an
idempotent acks=all producer and a consumer on a topic of 3 partitions
(replication factor 3, min.insync.replicas=2) while ``--events`` random
faults strike one after another (kill -9 and restart, SIGSTOP past
replica.lag.time.max.ms of one node or two, SIGTERM and restart).  Prints
each event, then a summary; exit status 0 when nothing acknowledged was
lost, duplicated or reordered, nothing a consumer saw went away, and the
replicas ended equal; 1 otherwise.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: the helpers

from replication_faults import run_soak, start_cluster  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100, help="fault events (default 100)")
    parser.add_argument("--seed", type=int, help="random seed (default: a new one, printed)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the nodes' data and logs (printed) after the run")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    base = Path(tempfile.mkdtemp(prefix="replication-soak-"))
    print(f"replication soak: {args.events} events, seed {seed}, data in {base}", flush=True)
    started = time.monotonic()
    nodes = start_cluster(base / "cluster")
    try:
        report = run_soak(nodes, "soak", seed, events=args.events,
                          say=lambda line: print(line, flush=True))
    finally:
        nodes.cleanup()
    print(f"--- summary ({time.monotonic() - started:.0f} s in all) ---")
    print(report.summary())
    if args.keep or report.problems():
        print(f"data and node logs kept in {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)
    return 1 if report.problems() else 0


if __name__ == "__main__":
    raise SystemExit(main())
