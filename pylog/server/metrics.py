"""Broker metrics in Prometheus text format, served at ``metrics.listener``.

``metrics.listener=http://127.0.0.1:9404/metrics`` turns them on; the page is
answered by a small asyncio HTTP handler on the broker's own loop (no thread).
With the setting empty (the default) no :class:`BrokerMetrics` exists,
``broker.metrics`` is None and each hook costs one attribute test.

Names follow Kafka's JMX metrics (3.6 docs, section 6.8) by one rule:
``kafka.<domain>:type=<Type>,name=<Name>,<tag>=<v>`` becomes
``kafka_<domain>_<type>_<name>{<tag>="<v>"}``, lower-cased, and

* a Meter (the ``...PerSec`` rates) is a Prometheus counter, ``_total``
  appended; the rate is ``rate(...)`` on the Prometheus side;
* a Gauge is a gauge;
* a Histogram/Timer (``TotalTimeMs``) is a summary: ``quantile`` 0.5, 0.99 and
  0.999 (since start) plus ``_sum`` and ``_count``.

Replication follows Kafka's split: the ReplicaManager gauges count this
node's partitions (led here, for the ISR ones), the KafkaController gauges
are the active controller's and 0 on every other node, and the followers'
lag is ReplicaFetcherManager's MaxLag and FetcherLagMetrics' ConsumerLag
(per partition followed, labelled with Kafka's fetcher client id).  The
embedded single node is its own controller and leads every partition.

Kafka-style names without a broker JMX counterpart: ``kafka_log_log_*`` per
partition (Kafka's ``kafka.log:type=Log,name=Size|LogEndOffset|LogStartOffset``),
and consumer-group lag as ``kafka_consumergroup_lag{group,topic,partition}``
(the name kafka_exporter uses; Kafka itself only has the client-side lag).

Counting never slows the produce path: plain integer increments on slots of
one object, no locks (everything runs on the loop), no per-record work:
messages-in is the appended batch's last - base offset + 1.  Request times
land in a log-linear histogram (8 sub-buckets per power of two of
microseconds: 12.5 % resolution) in preallocated lists.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pylog.protocol import ApiKey
from pylog.server.config import parse_listener

if TYPE_CHECKING:
    from pylog.net.listener import Listener
    from pylog.server.context import NodeServices

log = logging.getLogger(__name__)

MAX_API_KEY = 128
BUCKETS = 8 * 64
QUANTILES = (0.5, 0.99, 0.999)
_PLAIN = (bytes, list)
READ_TIMEOUT_S = 5.0


# The log cleaner's gauges (pylog.log.cleaner.LogCleaner.gauges).
_CLEANER_HELP = {
    "logcleaner_maxbufferutilizationpercent": "How full the last clean's offset map got",
    "logcleaner_cleanerrecopypercent": "Bytes the last clean wrote per 100 it read",
    "logcleaner_maxcleantimesecs": "Seconds the last clean took",
    "logcleaner_deadthreadcount": "Cleaner threads that died",
    "logcleanermanager_maxdirtypercent": "Dirty share of the dirtiest compacted log",
    "logcleanermanager_timesincelastrunms": "Milliseconds since a cleaner thread last looked "
                                            "for work",
    "logcleanermanager_uncleanablepartitionscount": "Partitions the cleaner gave up on",
}


def _request_name(key: int) -> str:
    """Kafka's request names: API_VERSIONS -> ApiVersions."""
    try:
        return "".join(w.capitalize() for w in ApiKey(key).name.split("_"))
    except ValueError:
        return f"ApiKey{key}"


def _bucket_of(us: int) -> int:
    if us < 16:
        return us if us > 0 else 0
    b = us.bit_length()
    idx = (b - 4) * 8 + (us >> (b - 4))
    return idx if idx < BUCKETS else BUCKETS - 1


def _bucket_value_us(idx: int) -> float:
    """The middle of a bucket, in microseconds."""
    if idx < 16:
        return float(idx)
    b = idx // 8 + 3
    top = idx % 8 + 8
    lower = top << (b - 4)
    return lower + (1 << (b - 4)) / 2


def _labels(**labels: Any) -> str:
    inner = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
    return "{" + inner + "}" if inner else ""


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class BrokerMetrics:
    """The broker's counters; the request path and the produce/fetch handlers
    increment the slots directly."""

    __slots__ = ("broker", "listener", "host", "port", "path", "bytes_in", "bytes_out",
                 "messages_in", "bytes_rejected", "failed_produce", "failed_fetch", "total_produce",
                 "total_fetch", "requests", "time_sum_us", "time_buckets",
                 "started_ns", "_last_idle", "_server")

    def __init__(self, node: NodeServices, listener: Listener, url: str) -> None:
        self.broker = node
        self.listener = listener
        self.host, self.port, self.path = parse_listener(url)
        self.bytes_in = 0
        self.bytes_out = 0
        self.messages_in = 0
        self.bytes_rejected = 0
        self.failed_produce = 0
        self.failed_fetch = 0
        self.total_produce = 0
        self.total_fetch = 0
        self.requests = [0] * MAX_API_KEY
        self.time_sum_us = [0] * MAX_API_KEY
        self.time_buckets: list[list[int] | None] = [None] * MAX_API_KEY
        self.started_ns = time.monotonic_ns()
        # (wall clock, the loop thread's CPU time) at the last page: the
        # network thread is idle whenever it is off the CPU.
        self._last_idle = (self.started_ns, time.thread_time_ns())
        self._server: asyncio.base_events.Server | None = None

    @classmethod
    def create(cls, node: NodeServices, listener: Listener) -> BrokerMetrics | None:
        """The broker's metrics when ``metrics.listener`` is set, else None.  Also
        puts the request timer in front of the listener's handler."""
        try:
            url = node.config["metrics.listener"]
        except KeyError:
            return None
        if not url:
            return None
        metrics = cls(node, listener, url)
        listener.handler = metrics.timed(listener.handler)
        return metrics

    # -- hooks ----------------------------------------------------------------

    def record(self, key: int, elapsed_ns: int) -> None:
        if key >= MAX_API_KEY:
            return
        us = elapsed_ns // 1000
        self.requests[key] += 1
        self.time_sum_us[key] += us
        buckets = self.time_buckets[key]
        if buckets is None:
            buckets = self.time_buckets[key] = [0] * BUCKETS
        buckets[_bucket_of(us)] += 1

    def timed(self, handler: Callable[[Any, bytearray], Any]) -> Callable[[Any, bytearray], Any]:
        """Wrap the request handler: count each request and time it from frame
        to response (a parked fetch counts its wait, as Kafka's TotalTimeMs)."""
        clock = time.perf_counter_ns
        record = self.record

        async def finish(key: int, start: int, pending: Any) -> Any:
            result = await pending
            record(key, clock() - start)
            return result

        def handle(conn: Any, frame: bytearray) -> Any:
            start = clock()
            result = handler(conn, frame)
            key = (frame[0] << 8) | frame[1]
            if result is None or type(result) in _PLAIN:
                record(key, clock() - start)
                return result
            return finish(key, start, result)

        return handle

    def produced(self, responses: list[tuple[str, list[tuple]]],
                 topics: list[tuple[str, list[tuple[int, Any]]]]) -> None:
        """After a produce request: partitions appended and failed (Kafka counts
        Total/FailedProduceRequests per partition).  ``responses`` and ``topics``
        are the native produce codec's tuples, in the same order."""
        for (_, answers), (_, parts) in zip(responses, topics, strict=False):
            self.total_produce += len(answers)
            for answer, (_, records) in zip(answers, parts, strict=False):
                if answer[1]:  # error code
                    self.failed_produce += 1
                    if records is not None:
                        self.bytes_rejected += len(records)

    def fetched(self, nbytes: int, topics: list[tuple[str, list]], failed: bool) -> None:
        """A fetch answered: its record bytes, its (topic, partitions) answers,
        whether any failed."""
        self.bytes_out += nbytes
        for _, partitions in topics:
            self.total_fetch += len(partitions)
        if failed:
            self.failed_fetch += 1

    # -- life cycle ---------------------------------------------------------------

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics at http://%s:%d%s", self.host, self.port, self.path)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    # -- the HTTP endpoint --------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            method, target = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
            if method not in ("GET", "HEAD"):
                status, body = "405 Method Not Allowed", b"only GET\n"
            elif target.split("?", 1)[0] != self.path:
                status, body = "404 Not Found", f"metrics are at {self.path}\n".encode()
            else:
                status, body = "200 OK", self.render().encode()
            head_out = (f"HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; "
                        f"charset=utf-8\r\nContent-Length: {len(body)}\r\n"
                        "Connection: close\r\n\r\n").encode()
            writer.write(head_out if method == "HEAD" else head_out + body)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ConnectionError):
            pass
        except Exception:
            log.exception("metrics request failed")
        finally:
            writer.close()

    # -- the page ---------------------------------------------------------------

    def _idle_fraction(self) -> float:
        """Kafka's NetworkProcessorAvgIdlePercent since the last page: the share
        of wall time the event loop's thread (where the page is rendered) spent
        off the CPU.  Any event loop, no hook in its selector."""
        now, cpu = time.monotonic_ns(), time.thread_time_ns()
        last_t, last_cpu = self._last_idle
        self._last_idle = (now, cpu)
        span = now - last_t
        if span <= 0:
            return 1.0
        return min(max(1.0 - (cpu - last_cpu) / span, 0.0), 1.0)

    def render(self) -> str:
        out: list[str] = []

        def family(name: str, kind: str, help_: str) -> None:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {kind}")

        # Text format 0.0.4: a counter's TYPE line names the sample, _total included.
        def meter(name: str, value: int, help_: str) -> None:
            full = f"kafka_server_brokertopicmetrics_{name}_total"
            family(full, "counter", help_)
            out.append(f"{full} {value}")

        meter("bytesinpersec", self.bytes_in, "Bytes appended from produce requests")
        meter("bytesoutpersec", self.bytes_out, "Record bytes sent in fetch responses")
        meter("messagesinpersec", self.messages_in, "Records appended")
        meter("bytesrejectedpersec", self.bytes_rejected,
              "Bytes of produce requests whose append failed")
        meter("failedproducerequestspersec", self.failed_produce,
              "Partition appends that failed")
        meter("failedfetchrequestspersec", self.failed_fetch, "Fetch requests with an error")
        meter("totalproducerequestspersec", self.total_produce, "Partition appends requested")
        meter("totalfetchrequestspersec", self.total_fetch, "Partition reads requested")

        keys = [k for k in range(MAX_API_KEY) if self.requests[k]]
        name = "kafka_network_requestmetrics_requestspersec_total"
        family(name, "counter", "Requests received, by request type")
        for k in keys:
            out.append(f"{name}{_labels(request=_request_name(k))} {self.requests[k]}")
        name = "kafka_network_requestmetrics_totaltimems"
        family(name, "summary", "Time from request frame to response, ms, by request type")
        for k in keys:
            req = _request_name(k)
            for q, value in zip(QUANTILES, self._quantiles_ms(k), strict=True):
                out.append(f"{name}{_labels(request=req, quantile=q)} {value:.3f}")
            out.append(f"{name}_sum{_labels(request=req)} {self.time_sum_us[k] / 1000:.3f}")
            out.append(f"{name}_count{_labels(request=req)} {self.requests[k]}")

        node = self.broker
        conns = list(self.listener.connections)
        queue = self.listener.queue

        def gauge(name: str, value: float, help_: str) -> None:
            family(name, "gauge", help_)
            out.append(f"{name} {value}")

        gauge("kafka_network_requestchannel_requestqueuesize", queue.requests,
              "Requests read and waiting behind their connection's earlier ones "
              "(queued.max.requests bounds them)")
        gauge("kafka_network_socketserver_memorypoolused", queue.bytes,
              "Bytes of requests read or being read and not yet handled")
        gauge("kafka_network_socketserver_memorypoolavailable",
              queue.max_bytes - queue.bytes if queue.bounded_bytes else 2**63 - 1,
              "What queued.max.request.bytes leaves (Long.MAX_VALUE: no bound)")
        gauge("kafka_network_socketserver_networkprocessoravgidlepercent",
              round(self._idle_fraction(), 6),
              "Share of time the event loop waited for I/O since the previous scrape")
        gauge("kafka_server_socketservermetrics_connection_count", len(conns),
              "Open client connections")
        logs = node.logs.logs()
        self._replication(out, family, gauge)
        sessions = node.fetch_sessions
        gauge("kafka_server_fetchsessioncache_numincrementalfetchsessions", len(sessions),
              "Incremental fetch sessions cached (KIP-227)")
        gauge("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
              sessions.partitions_cached(), "Partitions in the cached fetch sessions")
        name = "kafka_server_fetchsessioncache_incrementalfetchsessionevictionspersec_total"
        family(name, "counter", "Fetch sessions evicted to make room for new ones")
        out.append(f"{name} {sessions.evictions}")
        for metric, value in node.logs.cleaner.gauges().items():
            gauge(f"kafka_log_{metric}", value, _CLEANER_HELP[metric])
        items = sorted(logs.items())
        for metric, attr, help_ in (("size", "size", "Bytes of the partition's segments"),
                                    ("logendoffset", "log_end_offset", "Log end offset"),
                                    ("logstartoffset", "log_start_offset", "Log start offset")):
            name = f"kafka_log_log_{metric}"
            family(name, "gauge", help_)
            for (topic, partition), lg in items:
                try:
                    value = getattr(lg, attr)
                except Exception:  # closed by a concurrent delete
                    continue
                out.append(f"{name}{_labels(topic=topic, partition=partition)} {value}")
        self._group_lag(out, family, logs)
        out.append("")
        return "\n".join(out)

    def _replication(self, out: list[str], family: Callable[[str, str, str], None],
                     gauge: Callable[[str, float, str], None]) -> None:
        """This node's replicas (Kafka's ReplicaManager gauges and ISR meters),
        the controller's gauges (non-zero on the active controller only, as
        Kafka's), and the follower's fetch lag (ReplicaFetcherManager).  The
        embedded single node leads every partition and is its own controller."""
        node = self.broker
        replicas = node.replicas
        parts = replicas.partitions()
        led = [p for p in parts if p.is_leader]
        under_min = at_min = 0
        for p in led:
            min_isr = p.log.config.min_insync_replicas  # type: ignore[union-attr]
            under_min += len(p.isr) < min_isr
            at_min += len(p.isr) == min_isr
        gauge("kafka_server_replicamanager_partitioncount", len(parts),
              "Partitions with a replica on this node")
        gauge("kafka_server_replicamanager_leadercount", len(led), "Partitions this node leads")
        gauge("kafka_server_replicamanager_underreplicatedpartitions",
              sum(len(p.isr) < len(p.replicas) for p in led),
              "Partitions led here whose ISR is smaller than the replica set")
        gauge("kafka_server_replicamanager_underminisrpartitioncount", under_min,
              "Partitions led here whose ISR is smaller than min.insync.replicas")
        gauge("kafka_server_replicamanager_atminisrpartitioncount", at_min,
              "Partitions led here whose ISR is exactly min.insync.replicas")
        for name, value, help_ in (
                ("isrshrinkspersec", replicas.isr_shrinks, "ISR shrinks of partitions led here"),
                ("isrexpandspersec", replicas.isr_expands,
                 "ISR expansions of partitions led here")):
            full = f"kafka_server_replicamanager_{name}_total"
            family(full, "counter", help_)
            out.append(f"{full} {value}")
        controller = node.cluster.controller if node.cluster is not None else None
        active = controller is None or controller.active
        if controller is None:  # one node: its topics, every partition led here
            names = node.metadata.topic_names()
            topics, partitions = len(names), sum(
                t.count for n in names if (t := node.metadata.topic(n)) is not None)
            offline = imbalance = unclean = 0
        elif active:
            ctx = controller.ctx
            topics, partitions = len(ctx.assignments), len(ctx.states)
            offline = len(ctx.offline())
            imbalance = sum(1 for tp, st in ctx.states.items() if tp[0] not in ctx.deleting
                            and ctx.replicas(tp)[:1] != [st.leader])
            unclean = controller.unclean_elections
        else:
            topics = partitions = offline = imbalance = 0
            unclean = controller.unclean_elections
        gauge("kafka_controller_kafkacontroller_activecontrollercount", int(active),
              "1 on the active controller")
        gauge("kafka_controller_kafkacontroller_offlinepartitionscount", offline,
              "Partitions without a live leader (active controller)")
        gauge("kafka_controller_kafkacontroller_preferredreplicaimbalancecount", imbalance,
              "Partitions not led by their preferred replica (active controller)")
        gauge("kafka_controller_kafkacontroller_globaltopiccount", topics,
              "Topics in the cluster (active controller)")
        gauge("kafka_controller_kafkacontroller_globalpartitioncount", partitions,
              "Partitions with a leader and ISR in the cluster (active controller)")
        name = "kafka_controller_controllerstats_uncleanleaderelectionspersec_total"
        family(name, "counter", "Leaders elected out of sync (unclean.leader.election.enable)")
        out.append(f"{name} {unclean}")
        lags = list(replicas.fetchers.lags()) if replicas.fetchers is not None else []
        name = "kafka_server_replicafetchermanager_maxlag"
        family(name, "gauge", "Most messages a partition followed here is behind its "
                              "leader's high watermark")
        out.append(f"{name}{_labels(clientid='Replica')} "
                   f"{max((lag for *_, lag in lags), default=0)}")
        name = "kafka_server_fetcherlagmetrics_consumerlag"
        family(name, "gauge", "Messages a partition followed here is behind its leader's "
                              "high watermark")
        for client_id, (topic, partition), lag in sorted(lags):
            out.append(f"{name}{_labels(clientid=client_id, topic=topic, partition=partition)}"
                       f" {lag}")

    def _quantiles_ms(self, key: int) -> list[float]:
        buckets = self.time_buckets[key]
        total = self.requests[key]
        if not buckets or not total:
            return [0.0] * len(QUANTILES)
        out = []
        for q in QUANTILES:
            rank = q * total
            seen = 0
            for idx, n in enumerate(buckets):
                seen += n
                if n and seen >= rank:
                    out.append(_bucket_value_us(idx) / 1000)
                    break
            else:
                out.append(0.0)
        return out

    def _group_lag(self, out: list[str], family: Callable[[str, str, str], None],
                   logs: dict[Any, Any]) -> None:
        """Committed offset and lag (log end - committed) per group partition, from
        the group coordinator when this broker has one."""
        coordinator = getattr(self.broker, "groups", None)
        list_groups = getattr(coordinator, "list_groups", None)
        if list_groups is None:
            return
        rows = []
        for group in list_groups():
            for (topic, partition), committed in sorted(getattr(group, "offsets", {}).items()):
                offset = getattr(committed, "offset", None)
                lg = logs.get((topic, partition))
                if offset is None or lg is None:
                    continue
                rows.append((group.group_id, topic, partition, offset,
                             max(lg.high_watermark - offset, 0)))
        family("kafka_consumergroup_current_offset", "gauge",
               "Committed offset of a consumer group")
        for g, t, p, offset, _ in rows:
            out.append(f"kafka_consumergroup_current_offset"
                       f"{_labels(group=g, topic=t, partition=p)} {offset}")
        family("kafka_consumergroup_lag", "gauge",
               "High watermark minus the committed offset of a consumer group")
        for g, t, p, _, lag in rows:
            out.append(f"kafka_consumergroup_lag{_labels(group=g, topic=t, partition=p)} {lag}")
