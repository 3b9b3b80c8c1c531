"""A Spark standalone cluster on 127.0.0.1 (one master, two 1-core workers, started with the
pyspark package's ``spark-class``) and a pylog broker: a sweep's barrier stage must use both
workers, and every record must reach the broker."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("confluent_kafka")

from spark_helpers import java_available, topic_record_count  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as resp:
            return int(json.load(resp).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not java_available() or not SPARK_CLASS.is_file():
        pytest.skip("needs Java and pyspark's bin/spark-class")
    work = tmp_path_factory.mktemp("standalone")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    port, ui = free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    logs = []

    def start(name: str, *args: str) -> None:
        log = open(work / f"{name}.log", "wb")  # noqa: SIM115 (closed at teardown)
        logs.append(log)
        procs.append(subprocess.Popen([str(SPARK_CLASS), *args], env=env, stdout=log,
                                      stderr=subprocess.STDOUT))

    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
              "--port", str(port), "--webui-port", str(ui))
        for i in range(2):
            start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                  "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                  "--work-dir", str(work / f"work{i}"), master_url)
        deadline = time.monotonic() + 90
        while alive_workers(ui) < 2:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                pytest.fail("standalone cluster did not come up: "
                            + (work / "master.log").read_text(errors="replace")[-2000:])
            time.sleep(0.5)
        yield master_url
    finally:
        for proc in procs:  # only the JVMs started here, by pid
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        for log in logs:
            log.close()


def test_sweep_spreads_over_workers(standalone: str, broker: str, tmp_path: Path
                                    ) -> None:
    import pyarrow.parquet as pq

    proc = subprocess.run(
        [sys.executable, "-m", "spark_bench", "sweep", "--bootstrap-server", broker,
         "--topic", "cluster", "--grid", "linger.ms=0,5", "--tasks", "2",
         "--records-per-task", "500", "--master", standalone, "--out", str(tmp_path),
         "--spark-conf", "spark.executor.memory=512m", "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    tasks = pq.read_table(tmp_path / "tasks.parquet").to_pylist()
    assert len(tasks) == 4 and all(t["records"] == 500 for t in tasks)
    for cell in (0, 1):
        cell_tasks = [t for t in tasks if t["cell"] == cell]
        # Each worker's executor runs in its own work dir (work<i>/<app>/<executor id>).
        assert len({t["cwd"] for t in cell_tasks}) == 2
        assert {Path(t["cwd"]).parts[-3] for t in cell_tasks} == {"work0", "work1"}
    cells = pq.read_table(tmp_path / "results.parquet").to_pylist()
    assert [c["records"] for c in cells] == [1000, 1000]
    assert all(c["errors"] == 0 and c["p50_ms"] <= c["p99_ms"] <= c["max_ms"] for c in cells)
    assert topic_record_count(broker, "cluster") == 2000
