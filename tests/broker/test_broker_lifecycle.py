"""Startup, configuration errors, clean shutdown, crash and restart."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from kafka_wire import RawClient, latest_offset, produce_body

from pylog.protocol import ApiKey

ck = pytest.importorskip("confluent_kafka")


def _broker_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pylog", "broker", *args],
                          capture_output=True, text=True, timeout=60,
                          env=None if env is None else {**os.environ, **env})


def test_unknown_key_exits_2_naming_it(tmp_path) -> None:
    out = _broker_cli("--override", "log.segmnet.bytes=100", "--override",
                      f"log.dirs={tmp_path}")
    assert out.returncode == 2
    assert "log.segmnet.bytes" in out.stderr


def test_invalid_value_exits_2_naming_key(tmp_path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("# test\nnum.partitions=zero\n")
    out = _broker_cli("--config", str(props))
    assert out.returncode == 2
    assert "num.partitions" in out.stderr
    out = _broker_cli("--override", "listeners=SSL://127.0.0.1:9093")
    assert out.returncode == 2 and "listeners" in out.stderr


def test_unknown_event_loop_exits_2_naming_it(tmp_path) -> None:
    out = _broker_cli("--override", f"log.dirs={tmp_path}",
                      env={"PYLOG_EVENT_LOOP": "tornado"})
    assert out.returncode == 2
    assert "PYLOG_EVENT_LOOP='tornado'" in out.stderr and "uvloop" in out.stderr


def test_event_loop_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvloop by default; asyncio's own loop on request, or by default where
    uvloop is not installed; asking for a missing uvloop is an error."""
    import asyncio

    import uvloop

    from pylog.server.main import event_loop_factory

    monkeypatch.delenv("PYLOG_EVENT_LOOP", raising=False)
    assert event_loop_factory() is uvloop.new_event_loop
    assert event_loop_factory("asyncio") is asyncio.new_event_loop
    monkeypatch.setenv("PYLOG_EVENT_LOOP", "asyncio")
    assert event_loop_factory() is asyncio.new_event_loop
    monkeypatch.delenv("PYLOG_EVENT_LOOP")
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now fails
    assert event_loop_factory() is asyncio.new_event_loop
    with pytest.raises(ValueError, match="not installed"):
        event_loop_factory("uvloop")


def test_config_file_and_override(start_broker, tmp_path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=2\nnum.network.threads=3\nlog.retention.hours=1\n")
    b = start_broker(log_dir=tmp_path / "d", config=props)
    with RawClient(b.bootstrap) as c:
        md = c.request(ApiKey.METADATA, 9, {"topics": [{"name": "auto2"}],
                                            "allow_auto_topic_creation": True})
        assert len(md.topics[0].partitions) == 2
        r = c.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": 2, "resource_name": "auto2", "configuration_keys": None}]})
        configs = {e.name: e.value for e in r.results[0].configs}
        assert configs["retention.ms"] == "3600000"
    b = start_broker("num.partitions=3", log_dir=tmp_path / "e", config=props)
    with RawClient(b.bootstrap) as c:  # --override wins over the file
        md = c.request(ApiKey.METADATA, 9, {"topics": [{"name": "auto3"}],
                                            "allow_auto_topic_creation": True})
        assert len(md.topics[0].partitions) == 3


def test_clean_shutdown_keeps_data_and_marker(start_broker, tmp_path) -> None:
    data = tmp_path / "data"
    b = start_broker(log_dir=data)
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for i in range(500):
        p.produce("kept", value=b"%d" % i)
    assert p.flush(10) == 0
    assert b.stop() == 0
    assert (data / ".kafka_cleanshutdown").exists()
    assert (data / "meta.properties").read_text().count("cluster.id=") == 1
    b2 = start_broker(log_dir=data, port=b.port)
    with RawClient(b2.bootstrap) as c:
        assert latest_offset(c, "kept") == 500


def test_second_broker_on_the_same_log_dir_is_refused(start_broker, tmp_path) -> None:
    """Kafka's lock on each log dir: a second node on the same log.dirs (another
    port) refuses to start with Kafka's message; the first serves on and
    keeps every acknowledged record, across its restart and after a kill -9
    (the kernel drops a dead holder's lock)."""
    data = tmp_path / "data"
    b = start_broker(log_dir=data)
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for i in range(300):
        p.produce("locked", value=b"%d" % i)
    assert p.flush(10) == 0
    out = _broker_cli("--override", f"log.dirs={data}", "--override",
                      "listeners=PLAINTEXT://127.0.0.1:0")
    assert out.returncode == 1, out
    assert (f"Failed to acquire lock on file .lock in {data}. A Kafka instance in another "
            "process or thread is using this directory.") in out.stderr
    for i in range(300, 600):  # the first one never noticed
        p.produce("locked", value=b"%d" % i)
    assert p.flush(10) == 0
    b.kill()
    b2 = start_broker(log_dir=data, port=b.port)
    with RawClient(b2.bootstrap) as c:
        assert latest_offset(c, "locked") == 600


def test_kill_9_after_acks_1_loses_nothing(start_broker, tmp_path) -> None:
    data = tmp_path / "data"
    b = start_broker(log_dir=data)
    acked: list[int] = []
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "acks": "1", "linger.ms": 2})
    for i in range(5000):
        p.produce("crash", value=b"v%d" % i,
                  on_delivery=lambda err, msg: acked.append(msg.offset()) if not err else None)
        p.poll(0)
    assert p.flush(20) == 0
    assert len(acked) == 5000
    b.kill()
    assert not (data / ".kafka_cleanshutdown").exists()
    b2 = start_broker(log_dir=data, port=b.port)
    c = ck.Consumer({"bootstrap.servers": b2.bootstrap, "group.id": "g",
                     "enable.auto.commit": False})
    c.assign([ck.TopicPartition("crash", 0, 0)])
    values = []
    while len(values) < 5000:
        msgs = c.consume(1000, 5.0)
        if not msgs:
            break
        values += [m.value() for m in msgs if not m.error()]
    c.close()
    assert values == [b"v%d" % i for i in range(5000)]
    with RawClient(b2.bootstrap) as raw:  # and the log takes new appends after recovery
        from test_broker_protocol import batch

        r = raw.request(ApiKey.PRODUCE, 9, produce_body("crash", 0, batch()))
        assert r.responses[0].partition_responses[0].base_offset == 5000


def test_sigterm_right_after_the_ready_line_shuts_down_cleanly(start_broker, tmp_path) -> None:
    """The SIGTERM handler is in place before the broker prints its ready line,
    so a supervisor that stops it as soon as it is up gets a clean shutdown:
    exit code 0 and the clean-shutdown marker (no recovery at the next start)."""
    for i in range(5):
        data = tmp_path / f"data-{i}"
        b = start_broker(log_dir=data)  # returns right after the ready line
        assert b.stop() == 0, "".join(b.output)
        assert (data / ".kafka_cleanshutdown").exists()


def test_sigterm_while_the_offsets_topic_is_created_leaves_every_index_trimmed(
        start_broker, tmp_path) -> None:
    """The first FindCoordinator creates ``__consumer_offsets``: the group's
    partition at once, the other 49 off the event loop.  A SIGTERM right after
    it stops that creation instead of letting it open logs the shutdown has
    already closed: under the clean-shutdown marker no index is left at its
    preallocated size, and the next start reports none corrupt."""
    for i in range(3):
        data = tmp_path / f"data-{i}"
        b = start_broker(log_dir=data)
        with RawClient(b.bootstrap) as c:
            r = c.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
            assert r.error_code == 0
        assert b.stop() == 0, "".join(b.output)
        assert (data / ".kafka_cleanshutdown").exists()
        untrimmed = [f"{f.parent.name}/{f.name}" for f in data.glob("*-*/*index")
                     if f.stat().st_size > 0]
        assert untrimmed == []
        b2 = start_broker(log_dir=data, port=b.port)
        with RawClient(b2.bootstrap) as c:  # the restart finishes the topic
            r = c.request(ApiKey.METADATA, 4, {"topics": [{"name": "__consumer_offsets"}],
                                               "allow_auto_topic_creation": False})
            assert len(r.topics[0].partitions) == 50
        assert b2.stop() == 0
        assert "corrupt" not in "".join(b2.output)
