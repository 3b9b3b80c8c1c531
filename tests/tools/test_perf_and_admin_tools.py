"""Perf-test tools, configs, log-dirs, get-offsets and the metrics page."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest
from metrics_page import scrape as _metrics
from metrics_page import value as _value

FINAL = re.compile(
    r"^(?P<n>\d+) records sent, (?P<rate>\d+\.\d{6}) records/sec \((?P<mb>\d+\.\d{2}) MB/sec\), "
    r"(?P<avg>\d+\.\d{2}) ms avg latency, (?P<max>\d+\.\d{2}) ms max latency, (?P<p50>\d+) ms "
    r"50th, (?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99\.9th\.$")
WINDOW = re.compile(
    r"^\d+ records sent, \d+\.\d records/sec \(\d+\.\d{2} MB/sec\), \d+\.\d ms avg latency, "
    r"\d+\.\d ms max latency\.$")
CSV_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
              "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"


def test_producer_perf_then_consumer_perf(pylog, tool_broker, topic, tmp_path):
    b = tool_broker.bootstrap
    before = _metrics(tool_broker.metrics_url)
    out = tmp_path / "perf.json"
    r = pylog("producer-perf-test", "--topic", topic, "--num-records", "20000",
              "--record-size", "100", "--throughput", "-1",
              "--producer-props", f"bootstrap.servers={b}", "acks=1", "linger.ms=5",
              "--json", str(out))
    assert r.returncode == 0, r.stderr
    m = FINAL.match(r.stdout.splitlines()[-1])
    assert m, r.stdout
    assert int(m["n"]) == 20000
    assert int(m["p50"]) <= int(m["p95"]) <= int(m["p99"]) <= int(m["p999"])
    figures = json.loads(out.read_text())
    assert figures["records"] == 20000 and figures["errors"] == 0
    assert figures["records_per_sec"] > 0

    after = _metrics(tool_broker.metrics_url)
    grew = (_value(after, "kafka_server_brokertopicmetrics_messagesinpersec")
            - _value(before, "kafka_server_brokertopicmetrics_messagesinpersec"))
    assert grew == 20000
    grew_bytes = (_value(after, "kafka_server_brokertopicmetrics_bytesinpersec")
                  - _value(before, "kafka_server_brokertopicmetrics_bytesinpersec"))
    assert grew_bytes >= 20000 * 100
    assert _value(after, "kafka_network_requestmetrics_requestspersec", request="Produce") > 0
    assert _value(after, "kafka_network_requestmetrics_totaltimems", request="Produce",
                  quantile="0.99") >= 0
    assert _value(after, "kafka_log_log_logendoffset", topic=topic, partition="0") == 20000
    assert _value(after, "kafka_log_log_size", topic=topic, partition="0") >= 20000 * 100
    assert _value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    idle = _value(after, "kafka_network_socketserver_networkprocessoravgidlepercent")
    assert 0 <= idle <= 1

    r = pylog("consumer-perf-test", "--bootstrap-server", b, "--topic", topic,
              "--messages", "20000", "--timeout", "10000")
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.splitlines()
    assert header == CSV_HEADER
    cols = row.split(", ")
    assert len(cols) == 10
    assert re.fullmatch(DATE, cols[0]) and re.fullmatch(DATE, cols[1])
    assert int(cols[4]) == 20000
    assert float(cols[2]) == pytest.approx(20000 * 100 / 2**20, rel=1e-3)
    out_bytes = _value(_metrics(tool_broker.metrics_url),
                       "kafka_server_brokertopicmetrics_bytesoutpersec")
    assert out_bytes >= 20000 * 100

    r = pylog("consumer-perf-test", "--bootstrap-server", b, "--topic", topic,
              "--messages", "20000", "--hide-header", "--show-detailed-stats",
              "--reporting-interval", "1")
    assert r.returncode == 0, r.stderr
    for line in r.stdout.splitlines():
        cols = line.split(", ")
        assert len(cols) == 10 and re.fullmatch(DATE, cols[0]) and cols[1] == "0"


def test_producer_perf_throttled_progress_lines(pylog, tool_broker, topic):
    r = pylog("producer-perf-test", "--topic", topic, "--num-records", "1500",
              "--record-size", "50", "--throughput", "1000", "--bootstrap-server",
              tool_broker.bootstrap, "--reporting-interval", "400", "--warmup-records", "100")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) >= 3
    assert all(WINDOW.match(line) for line in lines[:-1]), lines
    m = FINAL.match(lines[-1])
    assert m and int(m["n"]) == 1400  # warm-up records are not in the final figures
    assert 700 < float(m["rate"]) < 1300


def test_perf_tool_flag_errors(pylog, tool_broker, topic):
    r = pylog("producer-perf-test", "--topic", topic, "--num-records", "10",
              "--throughput", "-1", "--bootstrap-server", tool_broker.bootstrap)
    assert r.returncode == 1
    assert r.stderr == ("Either --record-size or --payload-file must be specified but not "
                        "both.\n")
    r = pylog("consumer-perf-test", "--bootstrap-server", tool_broker.bootstrap,
              "--topic", "never-created-topic", "--messages", "1")
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1


def test_payload_file(pylog, tool_broker, topic, tmp_path):
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha\nbeta\ngamma\n")
    r = pylog("producer-perf-test", "--topic", topic, "--num-records", "30",
              "--payload-file", str(payloads), "--throughput", "-1",
              "--producer-props", f"bootstrap.servers={tool_broker.bootstrap}")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"Reading payloads from: {payloads.resolve()}"
    assert lines[1] == "Number of messages read: 3"
    assert FINAL.match(lines[-1])


def test_configs_describe_alter(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    pylog("topics", "--bootstrap-server", b, "--create", "--topic", topic,
          "--config", "retention.ms=3600000")
    r = pylog("configs", "--bootstrap-server", b, "--entity-type", "topics",
              "--entity-name", topic, "--describe")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"Dynamic configs for topic {topic} are:"
    assert lines[1].startswith("  retention.ms=3600000 sensitive=false "
                               "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000")

    r = pylog("configs", "--bootstrap-server", b, "--entity-type", "topics",
              "--entity-name", topic, "--alter", "--add-config",
              "retention.ms=7200000,max.message.bytes=2000000")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"Completed updating config for topic {topic}.\n"
    r = pylog("configs", "--bootstrap-server", b, "--entity-type", "topics",
              "--entity-name", topic, "--alter", "--delete-config", "max.message.bytes")
    assert r.returncode == 0, r.stderr
    r = pylog("configs", "--bootstrap-server", b, "--entity-type", "topics",
              "--entity-name", topic, "--describe")
    names = [line.split("=")[0].strip() for line in r.stdout.splitlines()[1:]]
    assert names == ["retention.ms"]
    assert "retention.ms=7200000 " in r.stdout

    r = pylog("configs", "--bootstrap-server", b, "--entity-type", "brokers",
              "--entity-name", "0", "--describe")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "Dynamic configs for broker 0 are:"

    r = pylog("configs", "--bootstrap-server", b, "--entity-type", "topics",
              "--entity-name", "never-created-topic", "--describe")
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith("Error while executing config command with args")
    r = pylog("configs", "--bootstrap-server", b, "--entity-type", "topics",
              "--entity-name", topic, "--alter", "--delete-config", "no.such.config")
    assert r.returncode == 1 and r.stderr.rstrip().endswith("Invalid config(s): no.such.config")


def test_log_dirs_and_get_offsets(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    pylog("topics", "--bootstrap-server", b, "--create", "--topic", topic, "--partitions", "2")
    r = pylog("console-producer", "--bootstrap-server", b, "--topic", topic,
              "--property", "parse.key=true", stdin="a\t1\nb\t2\nc\t3\nd\t4\n")
    assert r.returncode == 0, r.stderr

    r = pylog("log-dirs", "--bootstrap-server", b, "--describe", "--topic-list", topic)
    assert r.returncode == 0, r.stderr
    first, second, payload = r.stdout.splitlines()
    assert first == "Querying brokers for log directories information"
    assert second == "Received log directory information from brokers 0"
    doc = json.loads(payload)
    assert doc["version"] == 1 and doc["brokers"][0]["broker"] == 0
    (log_dir,) = doc["brokers"][0]["logDirs"]
    assert log_dir["error"] is None
    parts = {p["partition"]: p for p in log_dir["partitions"]}
    assert sorted(parts) == [f"{topic}-0", f"{topic}-1"]
    assert sum(p["size"] for p in parts.values()) > 0
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in parts.values())

    r = pylog("get-offsets", "--bootstrap-server", b, "--topic", topic)
    assert r.returncode == 0, r.stderr
    rows = [line.split(":") for line in r.stdout.splitlines()]
    assert [(t, p) for t, p, _ in rows] == [(topic, "0"), (topic, "1")]
    assert sum(int(o) for _, _, o in rows) == 4
    r = pylog("get-offsets", "--bootstrap-server", b, "--topic", topic, "--partitions", "1",
              "--time", "-2")
    assert r.stdout == f"{topic}:1:0\n"
    r = pylog("get-offsets", "--bootstrap-server", b, "--topic", "never-created-topic")
    assert r.returncode == 1
    assert r.stderr == "Could not match any topic-partitions with the specified filters\n"


def test_metrics_group_lag_and_404(pylog, tool_broker, topic):
    b = tool_broker.bootstrap
    group = f"{topic}-g"
    pylog("console-producer", "--bootstrap-server", b, "--topic", topic, "--sync",
          stdin="1\n2\n3\n4\n5\n")
    r = pylog("console-consumer", "--bootstrap-server", b, "--topic", topic, "--group", group,
              "--from-beginning", "--max-messages", "2", "--timeout-ms", "10000")
    assert r.returncode == 0, r.stderr
    families = _metrics(tool_broker.metrics_url)
    committed = _value(families, "kafka_consumergroup_current_offset", group=group,
                       topic=topic, partition="0")
    lag = _value(families, "kafka_consumergroup_lag", group=group, topic=topic, partition="0")
    assert committed + lag == 5 and committed >= 2
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(tool_broker.metrics_url.replace("/metrics", "/nope"), timeout=5)
    assert err.value.code == 404
