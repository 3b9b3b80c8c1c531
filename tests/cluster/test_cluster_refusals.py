"""``pylog broker --nodes N`` refuses what it cannot run before starting
anything: status 2, one line naming the problem, no process, no files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT_S = 60  # a liveness bound
KRAFT_CONFIG = Path(__file__).resolve().parents[2] / "config" / "kraft" / "server.properties"

REFUSALS = [
    (["--nodes", "0"], "--nodes must be 1 or more, not 0"),
    (["--nodes", "-2"], "--nodes must be 1 or more, not -2"),
    (["--nodes", "3", "--override", "listeners=PLAINTEXT://127.0.0.1:65534"],
     "--nodes 3: node 2 would listen on port 65536 (listeners puts node 0 on port 65534), "
     "past 65535"),
    (["--nodes", "70000", "--override", "listeners=PLAINTEXT://127.0.0.1:0"],
     "--nodes 70000: each node needs a port of its own (at most 65535 nodes)"),
    (["--nodes", "2", "--override", "advertised.listeners=PLAINTEXT://example.com:65535"],
     "--nodes 2: node 1 would listen on port 65536 (advertised.listeners puts node 0 on "
     "port 65535), past 65535"),
    (["--nodes", "2", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
      "--override", "advertised.listeners=PLAINTEXT://example.com:0"],
     "advertised.listeners: PLAINTEXT://example.com:0 cannot be advertised (port 0)"),
    (["--nodes", "3", "--override", "metrics.listener=http://127.0.0.1:65534/metrics"],
     "--nodes 3: node 2 would listen on port 65536 (metrics.listener puts node 0 on port "
     "65534), past 65535"),
    (["--nodes", "3", "--override", "listeners=PLAINTEXT://127.0.0.1:19092",
      "--override", "metrics.listener=http://127.0.0.1:19094/metrics"],
     "--nodes 3: metrics.listener's ports 19094-19096 overlap the listeners' ports "
     "19092-19094 (each node takes the first port + its id)"),
    (["--nodes", "2", "--override", "no.such.key=1"], "unknown configuration 'no.such.key'"),
    (["--nodes", "2", "--config", str(KRAFT_CONFIG)],
     "process.roles is set (KRaft): a cluster of --nodes keeps its metadata in ZooKeeper; "
     "leave process.roles unset"),
    (["--nodes", "2", "--override", "node.id=4", "--override", "broker.id=5"],
     "node.id and broker.id disagree"),
    (["--nodes", "2", "--zookeeper-config", "missing.properties"],
     "--zookeeper-config: cannot read missing.properties: No such file or directory"),
    (["--nodes", "2", "--override", "zookeeper.connect=127.0.0.1:2181",
      "--zookeeper-config", "missing.properties"],
     "--zookeeper-config: zookeeper.connect=127.0.0.1:2181 names the ZooKeeper to use, "
     "so none is started"),
    (["--nodes", "1", "--zookeeper-config", "missing.properties"],
     "--zookeeper-config is for a cluster (--nodes 2 or more); one node needs no ZooKeeper"),
]


@pytest.mark.parametrize(("args", "message"), REFUSALS, ids=[m[:40] for _, m in REFUSALS])
def test_refused_before_anything_starts(tmp_path: Path, args: list[str], message: str) -> None:
    data = tmp_path / "data"
    # log.dirs last: it wins over a --config's.
    out = subprocess.run([sys.executable, "-m", "pylog", "broker", *args,
                          "--override", f"log.dirs={data}"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert (out.returncode, out.stderr, out.stdout) == (2, f"pylog broker: {message}\n", "")
    assert not data.exists()
