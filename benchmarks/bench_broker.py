"""pylog vs librdkafka's in-memory mock broker: produce, consume, CPU, latency.

    python benchmarks/bench_broker.py            # 1,000,000 records per producer run
    python benchmarks/bench_broker.py --quick    # 100,000: a few minutes
    python benchmarks/bench_broker.py --override log.cache.drop.behind.bytes=8388608

One run measures, against a pylog broker (a subprocess, data in a temporary
directory) and against librdkafka's mock cluster (``test.mock.num.brokers=1``
in a confluent-kafka client started in its own process; records kept in
memory, so it shows what the clients themselves can do):

* producer throughput, records of 100 B and 1 KiB, acks=1 and acks=all,
  linger.ms=5, from two clients in turn: confluent-kafka (in this process)
  and kcat (``kcat -P -l file``, a pre-generated file of records);
* consumer throughput: confluent-kafka (fetch.queue.backoff.ms=10, otherwise
  librdkafka's default fetch sizes; a new consumer per pass, each reading 8
  topics) and kcat -C -c (one topic, a process per pass; the median pass,
  as one in twenty meets a 500 ms librdkafka start-up race).  The mock keeps only
  5 MiB per partition, so every partition holds at most 4 MiB;
* broker CPU seconds per GB produced and per GB fetched, of the pylog process
  and of the mock's host process: each is moved into a cgroup of its own under
  cgroup v1's cpuacct (nanoseconds, every thread; root only), else utime+stime
  from /proc/<pid>/stat (10 ms ticks: 0.1 s/GB on a 100 MB run); beside
  them, the CPU this script spends writing as many bytes to a new file with
  plain ``write`` (the page-cache floor a storing broker cannot go under),
  and that floor added to the mock's kernel CPU over the mock's whole CPU
  (``floor/mock``: above 1.00, no broker that stores can match the mock);
* produce latency p50/p99/p99.9 at a fixed 50,000 records/s (librdkafka's
  own per-message latency: produce() to delivery report);
* before anything is measured, each broker is asked for the consumers' group
  coordinator (pylog creates ``__consumer_offsets`` then: one-off start-up work);
* zero copy: during a consume, strace counts the bytes the pylog process
  sends with sendfile (page cache -> socket, never in Python) against the
  bytes it sends from its own buffers (sendmsg/send/write: headers, framing).

Everything ends in ONE table.  Timings on a shared 2-core VM swing by 10-20%
from run to run, so every produce and consume row is run ``--repeat`` times
(5 by default), pylog and the mock alternating (and which goes first), and
the table gives each broker's medians; the ratios (pylog/mock) and CPU s/GB
are the numbers to compare.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib.metadata import version

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 4  # the mock auto-creates topics with 4 partitions; pylog topics match
MOCK_KEEPS = 5 * 1024 * 1024  # bytes per partition the mock retains
CONSUME_TOPICS = 8  # the confluent consumer reads 8 topics x 4 partitions x ~4 MiB a pass
CLK_TCK = os.sysconf("SC_CLK_TCK")
GROUP = "bench"  # the consumers' group.id (librdkafka looks up its coordinator)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int, *, kernel_only: bool = False) -> float:
    """utime + stime of a process (all its threads, dead ones too), or its
    stime alone, from /proc/<pid>/stat: clock ticks (10 ms), so 0.1 s/GB on a
    100 MB run."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[12]) + (0 if kernel_only else int(fields[11]))) / CLK_TCK


def spent(now: tuple[float, float], before: tuple[float, float]) -> tuple[float, float]:
    """Two ``Target.cpu_split`` readings' difference."""
    return now[0] - before[0], now[1] - before[1]


CPUACCT = "/sys/fs/cgroup/cpuacct"  # cgroup v1 CPU accounting: nanoseconds


class CpuMeter:
    """A broker process's CPU seconds, to the nanosecond where it can be.

    The process (and every thread it starts later) is moved into a cgroup of
    its own under cgroup v1's cpuacct, whose ``cpuacct.usage`` counts CPU
    nanoseconds, threads that have exited included.  Where that cannot be done
    (no cpuacct hierarchy, not root), /proc/<pid>/stat's clock ticks.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.group: str | None = os.path.join(CPUACCT, f"pylog-bench-{pid}")
        try:
            os.makedirs(self.group, exist_ok=True)
            with open(os.path.join(self.group, "cgroup.procs"), "w") as f:
                f.write(str(pid))
        except OSError:
            self.close()

    @property
    def precise(self) -> bool:
        return self.group is not None

    def seconds(self) -> float:
        if self.group is None:
            return cpu_seconds(self.pid)
        with open(os.path.join(self.group, "cpuacct.usage")) as f:
            return int(f.read()) / 1e9

    def kernel_seconds(self) -> float:
        """The part spent in the kernel (system calls, page faults): the
        process's stime, in clock ticks, whose sampling is also what splits
        cgroup v1's cpuacct.usage_sys from usage_user (and that one adds the
        interrupts that land while any thread of the group runs)."""
        return cpu_seconds(self.pid, kernel_only=True)

    def close(self) -> None:
        """Back to the root group (if alive), and the group removed."""
        group, self.group = self.group, None
        if group is None or not os.path.isdir(group):
            return
        try:
            with open(os.path.join(CPUACCT, "cgroup.procs"), "w") as f:
                f.write(str(self.pid))
        except OSError:
            pass  # exited
        try:
            os.rmdir(group)
        except OSError:
            pass


# -- the two brokers --------------------------------------------------------------------

MOCK_HOST = r"""
import sys, confluent_kafka as ck
p = ck.Producer({"test.mock.num.brokers": int(sys.argv[1]), "log_level": 0})
b = next(iter(p.list_topics(timeout=10).brokers.values()))
print(f"{b.host}:{b.port}", flush=True)
sys.stdin.read()  # until the benchmark closes our stdin
"""


@dataclass
class Target:
    name: str
    bootstrap: str
    pid: int
    proc: subprocess.Popen
    meter: CpuMeter | None = None

    def cpu_seconds(self) -> float:
        if self.meter is None:
            self.meter = CpuMeter(self.pid)
        return self.meter.seconds()

    def cpu_split(self) -> tuple[float, float]:
        """(CPU seconds, the kernel's part of them)."""
        if self.meter is None:
            self.meter = CpuMeter(self.pid)
        return self.meter.seconds(), self.meter.kernel_seconds()

    def stop(self) -> None:
        if self.proc.poll() is None:
            if self.name == "mock":
                self.proc.stdin.close()
            else:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.meter is not None:
            self.meter.close()


def start_pylog(data_dir: str, overrides: list[str]) -> Target:
    port = free_port()
    settings = [f"listeners=PLAINTEXT://127.0.0.1:{port}", f"log.dirs={data_dir}",
                f"num.partitions={PARTITIONS}", *overrides]
    proc = subprocess.Popen(
        [sys.executable, "-m", "pylog", "broker",
         *(arg for kv in settings for arg in ("--override", kv))],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.2)[0]:
            line = proc.stdout.readline()
            if "listening on" in line:
                return Target("pylog", f"127.0.0.1:{port}", proc.pid, proc)
            if not line:
                break
    proc.kill()
    raise SystemExit("pylog broker did not start")


def start_mock(brokers: int = 1) -> Target:
    """librdkafka's mock cluster of ``brokers`` in a process of its own; the
    target's bootstrap is one of them (a client learns the others)."""
    proc = subprocess.Popen([sys.executable, "-c", MOCK_HOST, str(brokers)],
                            stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline().strip()
    if not line:
        raise SystemExit("mock broker did not start")
    return Target("mock", line, proc.pid, proc)


def make_topic(target: Target, topic: str) -> None:
    if target.name == "pylog":
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    # the mock creates topics on first use, with 4 partitions


def warm_group(target: Target, group: str) -> None:
    """Find the consumer group's coordinator before anything is measured: on
    pylog the first FindCoordinator creates ``__consumer_offsets``, which is
    start-up work (Kafka's brokers have it long before a benchmark runs), not
    part of the consume rows."""
    c = ck.Consumer({"bootstrap.servers": target.bootstrap, "group.id": group,
                     "enable.auto.commit": False})
    try:  # OffsetFetch: sent to the coordinator, once librdkafka has found it
        c.committed([ck.TopicPartition("bench-warm-up", 0)], timeout=30)
    finally:
        c.close()
    time.sleep(0.5)  # pylog creates the topic's other partitions in the background


def drop_topic(target: Target, topic: str) -> None:
    if target.name == "pylog":  # frees the disk between runs
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        admin.delete_topics([topic])[topic].result(60)


# -- load ----------------------------------------------------------------------------------


def produce_confluent(target: Target, topic: str, count: int, size: int, acks: str) -> float:
    producer = ck.Producer({"bootstrap.servers": target.bootstrap, "acks": acks,
                            "linger.ms": 5, "batch.size": 1_000_000,
                            "queue.buffering.max.messages": 1_000_000})
    producer.produce(topic, b"w")  # warm up: metadata, connection
    producer.flush(30)
    value = os.urandom(size)
    failed = 0

    def delivered(err: object, _msg: object) -> None:
        nonlocal failed
        if err:
            failed += 1

    started = time.perf_counter()
    produce_ = producer.produce
    for i in range(count):
        try:
            produce_(topic, value, on_delivery=delivered)
        except BufferError:  # local queue full: let deliveries drain
            producer.poll(0.005)
            produce_(topic, value, on_delivery=delivered)
        if i & 4095 == 0:
            producer.poll(0)
    if producer.flush(600):
        raise SystemExit("records left unacknowledged after 600 s")
    if failed:
        raise SystemExit(f"{failed} records failed")
    return time.perf_counter() - started


def produce_kcat(target: Target, topic: str, path: str, acks: str) -> float:
    # kcat's librdkafka is 2.0.2; the same settings as the confluent producer.
    started = time.perf_counter()
    subprocess.run(["kcat", "-P", "-b", target.bootstrap, "-t", topic, "-X", "linger.ms=5",
                    "-X", f"acks={acks}", "-X", "batch.size=1000000",
                    "-X", "queue.buffering.max.messages=1000000", "-l", path],
                   check=True, timeout=1800)
    return time.perf_counter() - started


def produce(client: str, target: Target, topic: str, count: int, size: int, acks: str,
            records_file: str | None) -> float:
    """One producer run with ``client`` (kcat reads ``records_file``)."""
    if client == "confluent":
        return produce_confluent(target, topic, count, size, acks)
    assert records_file is not None
    return produce_kcat(target, topic, records_file, acks)


def write_records(path: str, size: int, count: int) -> str:
    """kcat's input: ``count`` lines of ``size`` bytes (one random line repeated)."""
    line = os.urandom(size).hex()[:size].encode() + b"\n"
    with open(path, "wb") as f:
        for _ in range(count // 1000):
            f.write(line * 1000)
    return path


def raw_write_cpu(folder: str, nbytes: int) -> float:
    """CPU seconds per GB of writing ``nbytes`` to a new file in ``folder`` with
    1 MiB ``os.write`` calls, then deleting it: what storing the produced bytes
    in the page cache costs on its own (no network, no validation, no fsync).
    The reference for the produce rows' CPU column."""
    chunk = os.urandom(1 << 20)
    path = os.path.join(folder, "raw-write-reference")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        started = time.thread_time()
        left = nbytes
        while left > 0:
            left -= os.write(fd, chunk[:min(left, len(chunk))])
        cpu = time.thread_time() - started
    finally:
        os.close(fd)
        os.unlink(path)
    return cpu / (nbytes / 1e9)


def fill_for_consume(target: Target, topic: str, size: int) -> int:
    """Records per partition, under the mock's 5 MiB, written to every partition."""
    per_partition = int(MOCK_KEEPS * 0.8) // (size + 20)
    producer = ck.Producer({"bootstrap.servers": target.bootstrap, "acks": "1",
                            "linger.ms": 5, "batch.size": 1_000_000,
                            "queue.buffering.max.messages": 1_000_000})
    value = os.urandom(size)
    for p in range(PARTITIONS):
        for _ in range(per_partition):
            try:
                producer.produce(topic, value, partition=p)
            except BufferError:
                producer.poll(0.005)
                producer.produce(topic, value, partition=p)
    producer.flush(120)
    return per_partition


def consume_confluent(target: Target, topics: list[str], per_partition: int,
                      passes: int) -> float:
    """``passes`` reads of every partition of ``topics``, a new consumer per
    pass; librdkafka's fetch sizes are its defaults (fetch.max.bytes 50 MiB,
    max.partition.fetch.bytes 1 MiB)."""
    total = per_partition * PARTITIONS * len(topics)
    elapsed = 0.0
    for _ in range(passes):
        c = ck.Consumer({"bootstrap.servers": target.bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "fetch.queue.backoff.ms": 10})
        c.assign([ck.TopicPartition(topic, p, 0) for topic in topics
                  for p in range(PARTITIONS)])
        got = 0
        started = time.perf_counter()
        while got < total:
            # consume(n) waits until n messages or the timeout: never ask past the end
            msgs = c.consume(min(10000, total - got), 10)
            if not msgs:
                raise SystemExit(f"consumer stalled at {got}/{total} on {target.name}")
            got += sum(1 for m in msgs if not m.error())
        elapsed += time.perf_counter() - started
        c.close()
    return elapsed


def consume_kcat(target: Target, topics: list[str], per_partition: int, passes: int) -> float:
    topic = topics[0]  # kcat -C reads one topic (several only as a -G group member)
    # -c (exit after that many records), not -e: -e waits for an empty fetch
    # at the end of every partition, i.e. fetch.wait.max.ms (500 ms) per pass,
    # which would be most of what a pass measures.
    # The passes' median, times the passes: a pass is ~60 ms, and about one in
    # twenty (against either broker) meets a librdkafka start-up race -- the
    # partitions assigned before their leader is known wait out a 500 ms
    # offset-query timer ("no current leader for partition") -- which summed
    # would decide the row.
    total = per_partition * PARTITIONS
    times = []
    for _ in range(passes):
        started = time.perf_counter()
        out = subprocess.run(["kcat", "-C", "-b", target.bootstrap, "-t", topic, "-o",
                              "beginning", "-c", str(total), "-q", "-f", "x"],
                             check=True, capture_output=True, timeout=600).stdout
        times.append(time.perf_counter() - started)
        if len(out) != per_partition * PARTITIONS:
            raise SystemExit(f"kcat read {len(out)} of {per_partition * PARTITIONS} records")
    return statistics.median(times) * passes


def latency(target: Target, topic: str, rate: int, seconds: float, size: int,
            acks: str = "all", partitions: int = PARTITIONS) -> list[float]:
    """Per-message latencies (ms) producing at a fixed ``rate`` (records that
    failed are counted and said on stderr, not in the latencies)."""
    producer = ck.Producer({"bootstrap.servers": target.bootstrap, "acks": acks,
                            "linger.ms": 5, "queue.buffering.max.messages": 1_000_000})
    for p in range(partitions):  # warm up: metadata, connection, every partition
        producer.produce(topic, b"w", partition=p)
    producer.flush(30)
    lat: list[float] = []
    failed = 0

    def delivered(err: object, msg: object) -> None:
        nonlocal failed
        if err:
            failed += 1
        else:
            lat.append(msg.latency() * 1000)

    value = os.urandom(size)
    tick = 0.001
    per_tick = rate * tick
    warmup = int(rate * 1.0)  # the first second is not counted
    started = time.perf_counter()
    sent = 0
    total = int(rate * seconds) + warmup
    while sent < total:
        due = int((time.perf_counter() - started) / tick * per_tick) + 1
        for _ in range(min(due, total) - sent):
            producer.produce(topic, value, on_delivery=delivered)
        sent = max(sent, min(due, total))
        producer.poll(0)
        pause = started + (sent / per_tick) * tick - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    producer.flush(60)
    achieved = total / (time.perf_counter() - started)
    lat = lat[warmup:]  # delivery order: the warm-up second's reports come first
    if achieved < rate * 0.9:
        print(f"  note: {target.name} latency run reached only {achieved:,.0f} records/s",
              file=sys.stderr)
    if failed:
        print(f"  note: {failed} records failed in {target.name}'s latency run",
              file=sys.stderr)
    return sorted(lat)


def medians(runs: dict[str, list]) -> dict[str, object]:
    """Per broker, the medians of its runs' records/s, CPU s/GB and kernel
    CPU s/GB (each taken on its own); for "write", the median of the floor
    runs."""
    out: dict[str, object] = {}
    for name, values in runs.items():
        if name in ("write", "fresh"):
            out[name] = statistics.median(values)
        else:
            out[name] = tuple(statistics.median(v[i] for v in values) for i in range(3))
    return out


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def zero_copy_share(target: Target, topics: list[str],
                    per_partition: int) -> tuple[int, int] | None:
    """(bytes sent by sendfile, bytes sent from buffers) by pylog during a consume."""
    if shutil.which("strace") is None:
        return None
    # -y: fds with their paths, to count only sendfile *to a socket* (pylog
    # also sendfiles cold segments to /dev/null to warm the page cache).
    trace = subprocess.Popen(["strace", "-f", "-qq", "-y", "-e",
                              "trace=sendfile,sendmsg,sendto,write,writev",
                              "-p", str(target.pid)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    if trace.poll() is not None:
        return None
    consume_confluent(target, topics, per_partition, 1)
    time.sleep(0.3)
    trace.terminate()
    _, err = trace.communicate(timeout=30)
    zero = buffered = 0
    for line in err.splitlines():
        m = re.search(r"(sendfile|sendmsg|sendto|writev|write)\((\d+<[^>]*>)?.*= (\d+)\s*$",
                      line)
        if m and "socket:" in (m.group(2) or ""):
            if m.group(1) == "sendfile":
                zero += int(m.group(3))
            else:
                buffered += int(m.group(3))
    return zero, buffered


# -- the run -------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="100,000 records per producer run, shorter consume/latency runs")
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--acks", default="1,all")
    parser.add_argument("--rate", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=None,
                        help="rounds per row, the brokers alternating (default 5; --quick 1)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a pylog broker setting (repeatable), e.g. "
                             "log.cache.drop.behind.bytes=8388608")
    args = parser.parse_args()
    records = args.records or (100_000 if args.quick else 1_000_000)
    passes = 2 if args.quick else 5
    repeat = args.repeat or (1 if args.quick else 5)
    lat_seconds = 3.0 if args.quick else 10.0
    sizes = [int(s) for s in args.sizes.split(",")]
    acks_list = args.acks.split(",")
    have_kcat = shutil.which("kcat") is not None
    clients = ["confluent"] + (["kcat"] if have_kcat else [])
    print(f"confluent-kafka {version('confluent-kafka')} (librdkafka {ck.libversion()[0]}), "
          f"kcat: {'yes' if have_kcat else 'not installed'}; {records:,} records per producer "
          f"run, linger.ms=5, {PARTITIONS} partitions, {os.cpu_count()} CPUs; medians of "
          f"{repeat} alternating rounds per row"
          + "".join(f"; pylog {kv}" for kv in args.override), flush=True)
    rows: list[tuple] = []
    with tempfile.TemporaryDirectory(prefix="pylog-bench-") as data:
        files = {}
        if have_kcat:
            for size in sizes:
                files[size] = write_records(os.path.join(data, f"records-{size}.txt"),
                                            size, records)
        pylog = start_pylog(os.path.join(data, "pylog"), args.override)
        mock = start_mock()
        targets = [pylog, mock]
        for t in targets:
            t.cpu_seconds()  # the meter: a cpuacct cgroup of its own where possible
        precise = all(t.meter is not None and t.meter.precise for t in targets)
        run_id = 0
        try:
            for t in targets:
                warm_group(t, GROUP)
            for size in sizes:
                for acks in acks_list:
                    for client in clients:
                        runs: dict[str, list] = {t.name: [] for t in targets}
                        runs["fresh"], runs["write"] = [], []
                        for round_ in range(repeat):
                            # The brokers alternate, and which goes first too.
                            for t in (targets if round_ % 2 == 0 else targets[::-1]):
                                run_id += 1
                                topic = f"p{run_id}"
                                make_topic(t, topic)
                                before = t.cpu_split()
                                secs = produce(client, t, topic, records, size, acks,
                                               files.get(size))
                                gb = records * size / 1e9
                                cpu, kernel = spent(t.cpu_split(), before)
                                runs[t.name].append((records / secs, cpu / gb, kernel / gb))
                                drop_topic(t, topic)
                                print(f"  produce {client} {size}B acks={acks} {t.name}: "
                                      f"{records / secs:,.0f} rec/s", file=sys.stderr,
                                      flush=True)
                            # Twice: the first write takes pages this VM gave
                            # back to its host (see below), the second reuses
                            # the ones the first freed -- the state the next
                            # pylog run meets, as it follows the second.
                            runs["fresh"].append(raw_write_cpu(data, records * size))
                            runs["write"].append(raw_write_cpu(data, records * size))
                        rows.append(("produce", client, size, acks, medians(runs)))
            share = None
            for size in sizes:
                per = {}
                for t in targets:
                    topics = []
                    for _ in range(CONSUME_TOPICS):
                        run_id += 1
                        topics.append(f"c{run_id}")
                        make_topic(t, topics[-1])
                        per_partition = fill_for_consume(t, topics[-1], size)
                    per[t.name] = (topics, per_partition)
                for client in clients:
                    runs = {t.name: [] for t in targets}
                    for round_ in range(repeat):
                        for t in (targets if round_ % 2 == 0 else targets[::-1]):
                            topics, per_partition = per[t.name]
                            read = topics if client == "confluent" else topics[:1]
                            before = t.cpu_split()
                            fn = consume_confluent if client == "confluent" else consume_kcat
                            secs = fn(t, read, per_partition, passes)
                            cpu, kernel = spent(t.cpu_split(), before)
                            n = per_partition * PARTITIONS * len(read) * passes
                            gb = n * size / 1e9
                            runs[t.name].append((n / secs, cpu / gb, kernel / gb))
                            print(f"  consume {client} {size}B {t.name}: {n / secs:,.0f} rec/s",
                                  file=sys.stderr, flush=True)
                    rows.append(("consume", client, size, "-", medians(runs)))
                if size == max(sizes):
                    share = zero_copy_share(pylog, *per["pylog"])
            lat = {}
            for t in targets:
                run_id += 1
                topic = f"l{run_id}"
                make_topic(t, topic)
                lat[t.name] = latency(t, topic, args.rate, lat_seconds, 100)
        finally:
            for t in targets:
                t.stop()

    print()
    head = (f"| {'test':<8} | {'client':<9} | {'size':>5} | {'acks':>4} | {'pylog rec/s':>14} "
            f"| {'pylog MB/s':>10} | {'mock rec/s':>14} | {'mock MB/s':>9} | {'pylog/mock':>10} "
            f"| {'pylog CPU s/GB (kernel)':>23} | {'mock CPU s/GB (kernel)':>22} "
            f"| {'write() CPU s/GB':>16} | {'floor/mock CPU':>14} |")
    print(head)
    print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|")
    for test, client, size, acks, r in rows:
        (pr, pc, pk), (mr, mc, mk) = r["pylog"], r["mock"]
        write = f"{r['write']:.2f} ({r['fresh']:.2f})" if "write" in r else ""
        # What a broker that stores the records spends at the least: the mock's
        # kernel time (receiving the same requests, sending the same answers)
        # plus writing the bytes to the page cache. Over 1.00, no such broker
        # can spend less CPU per GB than the in-memory mock.
        floor = f"{(mk + r['write']) / mc:.2f}" if "write" in r else ""
        print(f"| {test:<8} | {client:<9} | {size:>5} | {acks:>4} | {pr:>14,.0f} "
              f"| {pr * size / 1e6:>10.1f} | {mr:>14,.0f} | {mr * size / 1e6:>9.1f} "
              f"| {pr / mr:>10.2f} | {f'{pc:.2f} ({pk:.2f})':>23} "
              f"| {f'{mc:.2f} ({mk:.2f})':>22} | {write:>16} | {floor:>14} |")
    for q, label in ((0.5, "p50"), (0.99, "p99"), (0.999, "p99.9")):
        p, m = percentile(lat["pylog"], q), percentile(lat["mock"], q)
        print(f"| {'latency':<8} | {'confluent':<9} | {100:>5} | {'all':>4} | "
              f"{label + ' ' + format(p, '.2f') + ' ms':>14} | {'':>10} | "
              f"{label + ' ' + format(m, '.2f') + ' ms':>14} | {'':>9} | {p / m:>10.2f} "
              f"| {'':>23} | {'':>22} | {'':>16} | {'':>14} |")
    if share is not None:
        zero, buffered = share
        total = zero + buffered
        print(f"| {'zerocopy':<8} | {'confluent':<9} | {max(sizes):>5} | {'-':>4} | "
              f"{format(zero / max(total, 1), '.2%') + ' sendfile':>14} | {'':>10} | {'':>14} | "
              f"{'':>9} | {'':>10} | {'':>23} | {'':>22} | {'':>16} | {'':>14} |")
        print(f"\nlatency: {args.rate:,} records/s for {lat_seconds:.0f} s, acks=all, "
              "librdkafka's produce-to-delivery time per message.")
        print(f"zerocopy: of {total / 1e6:.1f} MB the pylog process sent while serving a "
              f"consume, {zero / 1e6:.1f} MB went by sendfile (file -> socket, never copied "
              f"into Python) and {buffered / 1e3:.1f} kB from its own buffers (response "
              "headers, framing, other responses).")
    meter = ("its cgroup's cpuacct.usage (ns, every thread of the process)" if precise
             else "utime+stime from /proc/<pid>/stat (10 ms ticks)")
    print(f"CPU s/GB: broker process CPU, from {meter}, per GB of record payload produced "
          "(produce rows) or fetched (consume rows); the mock's process hosts an idle "
          "client too. In brackets, the part spent in the kernel (receiving, writing to "
          "the page cache, sending): the process's stime, sampled in 10 ms ticks; the "
          "rest is the broker's own code.")
    print("write() CPU s/GB: the same number of bytes written by this script to a new file "
          "beside pylog's data with 1 MiB os.write calls, then deleted, after each round: "
          "the page-cache cost any broker that stores the records pays and the in-memory "
          "mock does not. This VM gives freed memory back to its host, and a page it has "
          "to get back costs several times one it reuses: the number in brackets is the "
          "first write (fresh pages), the other a second write right after (reused "
          "pages, the state the next round's pylog run starts in).")
    print("floor/mock CPU: the least a broker that stores the records can spend, over what "
          "the mock spent: the mock's kernel CPU (receiving the same requests, answering "
          "them) plus write()'s reused-page figure, divided by the mock's whole CPU. Above "
          "1.00 no storing broker, however little code of its own it runs, meets the mock's "
          "CPU per GB on that row; fresh pages (the bracketed write() figure) raise the "
          "floor further.")
    overrides = dict(kv.partition("=")[::2] for kv in args.override)
    window = overrides.get("log.cache.drop.behind.bytes", "-1")
    print(f"page cache: pylog ran with log.cache.drop.behind.bytes={window} (-1, the "
          "default, is Kafka's behaviour: the kernel keeps what it likes; N >= 0: each "
          "partition keeps its newest N bytes cached and older pages are written back and "
          "evicted as it appends, so its appends reuse them); the mock keeps 5 MiB per "
          "partition in its own memory.")
    print(f"warm-up: before any measured run, each broker was asked for the coordinator of "
          f"group {GROUP!r} (pylog creates __consumer_offsets then, as Kafka on first use), "
          "so no consume row includes that one-off work.")


if __name__ == "__main__":
    main()
