"""All partition logs of one log directory (Kafka's ``LogManager``).

Owns ``meta.properties``, the clean-shutdown marker and the checkpoint files,
and runs the periodic tasks when called: :meth:`run_retention`,
:meth:`flush_due` and :meth:`checkpoint` (the broker's scheduler calls them
every ``log.retention.check.interval.ms`` / ``log.flush.scheduler.interval.ms``
/ ``log.flush.offset.checkpoint.interval.ms``; tests call them with a fake
clock).

The clean-shutdown marker ``.kafka_cleanshutdown`` is written last by
:meth:`close` and removed at open, after the logs are loaded: its presence at
open proves every log was flushed and its indexes trimmed, so no segment needs
rescanning.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from pylog.io.backend import IOBackend, get_backend
from pylog.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpointFile,
)
from pylog.log.config import LogConfig
from pylog.log.log import Log, parse_dir_name, wall_clock_ms

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
DELETE_DIR_SUFFIX = "-delete"

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def read_properties(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


class LogManager:
    def __init__(self, log_dir: Path, config: LogConfig | None = None, *,
                 node_id: int = 0, cluster_id: str | None = None,
                 time_ms: Callable[[], int] = wall_clock_ms,
                 backend: IOBackend | None = None,
                 topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        self.dir = Path(log_dir)
        self.default_config = config or LogConfig()
        self.topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self.time_ms = time_ms
        self.backend = backend or get_backend("posix")
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, Log] = {}
        self.dir.mkdir(parents=True, exist_ok=True)
        self.meta = self._meta_properties(node_id, cluster_id)
        self._recovery_file = OffsetCheckpointFile(self.dir / RECOVERY_POINT_CHECKPOINT)
        self._start_file = OffsetCheckpointFile(self.dir / LOG_START_OFFSET_CHECKPOINT)
        self.had_clean_shutdown = (self.dir / CLEAN_SHUTDOWN_FILE).exists()
        self._load_logs()
        # Only now: a crash during loading must recover again next time.
        (self.dir / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        self._closed = False

    # -- startup -----------------------------------------------------------

    def _meta_properties(self, node_id: int, cluster_id: str | None) -> dict[str, str]:
        path = self.dir / META_PROPERTIES
        if path.exists():
            meta = read_properties(path)
            if "node.id" in meta and int(meta["node.id"]) != node_id:
                raise ValueError(f"{path} belongs to node.id={meta['node.id']}, "
                                 f"not {node_id}")
            if cluster_id and meta.get("cluster.id") not in (None, cluster_id):
                raise ValueError(f"{path} belongs to cluster.id={meta['cluster.id']}, "
                                 f"not {cluster_id}")
            return meta
        meta = {"version": "1", "node.id": str(node_id),
                "cluster.id": cluster_id or uuid.uuid4().hex[:22]}
        tmp = path.with_name(META_PROPERTIES + ".tmp")
        tmp.write_text("#\n" + "".join(f"{k}={v}\n" for k, v in meta.items()))
        os.replace(tmp, path)
        return meta

    def _load_logs(self) -> None:
        recovery = self._recovery_file.read()
        starts = self._start_file.read()
        for path in sorted(self.dir.iterdir()):
            if not path.is_dir():
                continue
            if path.name.endswith(DELETE_DIR_SUFFIX):
                # A topic deletion that did not finish: finish it.
                shutil.rmtree(path, ignore_errors=True)
                continue
            try:
                tp = parse_dir_name(path.name)
            except ValueError:
                continue
            self._logs[tp] = Log.open(
                path, self.config_for(tp[0]), time_ms=self.time_ms, backend=self.backend,
                recovery_point=recovery.get(tp, 0), log_start_offset=starts.get(tp, 0),
                had_clean_shutdown=self.had_clean_shutdown)

    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_config)

    # -- logs --------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int,
                          config: LogConfig | None = None) -> Log:
        with self._lock:
            tp = (topic, partition)
            found = self._logs.get(tp)
            if found is not None:
                return found
            if config is not None:
                self.topic_configs[topic] = config
            path = self.dir / f"{topic}-{partition}"
            new = Log.open(path, self.config_for(topic), time_ms=self.time_ms,
                           backend=self.backend, had_clean_shutdown=True)
            self._logs[tp] = new
            return new

    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def delete_log(self, topic: str, partition: int) -> None:
        """Rename ``<topic>-<partition>`` to ``<topic>-<partition>.<id>-delete``
        (so a crash mid-way leaves a name the next start finishes deleting),
        then remove it."""
        with self._lock:
            found = self._logs.pop((topic, partition), None)
            if found is None:
                return
            found.close_handlers()
            doomed = found.dir.with_name(f"{found.dir.name}.{uuid.uuid4().hex}"
                                         f"{DELETE_DIR_SUFFIX}")
            os.replace(found.dir, doomed)
            shutil.rmtree(doomed, ignore_errors=True)

    def delete_topic(self, topic: str) -> int:
        with self._lock:
            partitions = [p for (t, p) in self._logs if t == topic]
            for partition in partitions:
                self.delete_log(topic, partition)
            self.topic_configs.pop(topic, None)
            self.checkpoint()
            return len(partitions)

    # -- periodic tasks ----------------------------------------------------

    def run_retention(self, now_ms: int | None = None) -> int:
        """Delete old segments of every log; returns the number deleted."""
        now = self.time_ms() if now_ms is None else now_ms
        return sum(lg.delete_old_segments(now) for lg in list(self._logs.values()))

    def flush_due(self, now_ms: int | None = None) -> int:
        """Flush rolled segments and logs past flush.ms; returns logs flushed."""
        now = self.time_ms() if now_ms is None else now_ms
        return sum(1 for lg in list(self._logs.values()) if lg.flush_due(now))

    def checkpoint(self) -> None:
        """Write the recovery points and log start offsets of every log."""
        with self._lock:
            logs = self._logs
            self._recovery_file.write({tp: lg.recovery_point for tp, lg in logs.items()})
            self._start_file.write({tp: lg.log_start_offset for tp, lg in logs.items()})

    def close(self) -> None:
        """Clean shutdown: close every log (flushing it), checkpoint, then the marker."""
        with self._lock:
            if self._closed:
                return
            for lg in self._logs.values():
                lg.close()
            self.checkpoint()
            marker = self.dir / CLEAN_SHUTDOWN_FILE
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            dfd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
            self._closed = True
