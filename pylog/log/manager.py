"""All partition logs of one log directory (Kafka's ``LogManager``).

Owns ``meta.properties``, the clean-shutdown marker and the checkpoint files,
and the periodic tasks: :meth:`run_retention`, :meth:`flush_due`,
:meth:`checkpoint_recovery_points`, :meth:`checkpoint_log_start_offsets` and
:meth:`drop_cold_cache`.  :meth:`start_scheduler` runs them on one daemon
thread, each every its own interval from :class:`~pylog.log.config.ManagerConfig`
(``log.retention.check.interval.ms``, ``log.flush.scheduler.interval.ms``,
``log.flush.offset.checkpoint.interval.ms``,
``log.flush.start.offset.checkpoint.interval.ms``; the cold-cache drop on the
retention interval); :meth:`run_due` is one pass of it, which tests drive
with a fake clock.  A caller with its own scheduler (the broker) may call the
tasks directly instead.

The clean-shutdown marker ``.kafka_cleanshutdown`` is written last by
:meth:`close` and removed at open, after the logs are loaded: its presence at
open proves every log was flushed and its indexes trimmed, so no segment needs
rescanning.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from pylog.io.backend import IOBackend, get_backend
from pylog.log import meta_properties
from pylog.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from pylog.log.cleaner import CLEANER_CHECKPOINT, LogCleaner
from pylog.log.config import CleanerConfig, LogConfig, ManagerConfig
from pylog.log.dir_failure import LogDirFailureChannel
from pylog.log.dir_lock import LogDirLock
from pylog.log.drop_behind import DropBehind
from pylog.log.durable import write_atomically
from pylog.log.errors import LogClosedError
from pylog.log.log import Log, parse_dir_name, wall_clock_ms
from pylog.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, file_name

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
# Kafka flushes a rolled segment asynchronously right after the roll; here the
# scheduler's flush pass picks rolled segments up at least this often.
ROLLED_FLUSH_INTERVAL_MS = 1000
# The scheduler thread wakes at least this often (a huge interval, or a clock
# that is not wall time, must not park it in one long wait).
_MAX_WAIT_S = 1.0

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class LogManager:
    def __init__(self, log_dir: Path, config: LogConfig | None = None, *,
                 node_id: int = 0, cluster_id: str | None = None,
                 time_ms: Callable[[], int] = wall_clock_ms,
                 backend: IOBackend | None = None,
                 topic_configs: Mapping[str, LogConfig] | None = None,
                 manager_config: ManagerConfig | None = None,
                 cleaner_config: CleanerConfig | None = None) -> None:
        self.dir = Path(log_dir)
        self.default_config = config or LogConfig()
        self.manager_config = manager_config or ManagerConfig()
        self.topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self.time_ms = time_ms
        self.backend = backend or get_backend("posix")
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, Log] = {}
        self._roll_listener: Callable[[Log, int], None] | None = None
        # An I/O error in the dir takes it offline (see pylog.log.dir_failure).
        self.failures = LogDirFailureChannel(str(self.dir))
        self.dir.mkdir(parents=True, exist_ok=True)
        # Before anything in the dir is read or written (Kafka's lockLogDirs).
        self.dir_lock = LogDirLock(self.dir).acquire()
        try:
            self._open(node_id, cluster_id, cleaner_config)
        except BaseException:
            self.dir_lock.release()
            raise

    def _open(self, node_id: int, cluster_id: str | None,
              cleaner_config: CleanerConfig | None) -> None:
        self.meta = meta_properties.ensure(self.dir, node_id, cluster_id)
        self._recovery_file = OffsetCheckpointFile(self.dir / RECOVERY_POINT_CHECKPOINT)
        self._start_file = OffsetCheckpointFile(self.dir / LOG_START_OFFSET_CHECKPOINT)
        self._hw_file = OffsetCheckpointFile(self.dir / REPLICATION_OFFSET_CHECKPOINT)
        self.had_clean_shutdown = (self.dir / CLEAN_SHUTDOWN_FILE).exists()
        self._load_logs()
        # Compaction of cleanup.policy=compact logs; its threads start with
        # the scheduler's.
        self.cleaner = LogCleaner(self.dir, self.logs, cleaner_config, time_ms=self.time_ms,
                                  failures=self.failures)
        # Only now: a crash during loading must recover again next time.
        (self.dir / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        self._closed = False
        self._next_due: dict[str, int] = {}
        self._scheduler: threading.Thread | None = None
        self._stop = threading.Event()
        self._pass_lock = threading.Lock()  # one run_due pass at a time

    # -- startup -----------------------------------------------------------

    def _load_logs(self) -> None:
        # As Kafka's loadLogs: an unreadable checkpoint is not fatal; recovery
        # then starts from offset 0 and log start offsets from the first segment.
        try:
            recovery = self._recovery_file.read()
        except (OSError, ValueError) as exc:
            log.warning("error reading %s, resetting the recovery checkpoint to 0: %s",
                        self._recovery_file.path, exc)
            recovery = {}
        try:
            starts = self._start_file.read()
        except (OSError, ValueError) as exc:
            log.warning("error reading %s, resetting to the base offset of the first "
                        "segment: %s", self._start_file.path, exc)
            starts = {}
        try:
            cleaned = OffsetCheckpointFile(self.dir / CLEANER_CHECKPOINT).read()
        except (OSError, ValueError):
            cleaned = {}  # the cleaner logs it when it reads the file
        try:
            watermarks = self._hw_file.read()
        except (OSError, ValueError) as exc:
            log.warning("error reading %s, high watermarks from the log ends: %s",
                        self._hw_file.path, exc)
            watermarks = {}
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
            lg = self._logs[tp] = self._attach(Log.open(
                path, self.config_for(tp[0]), time_ms=self.time_ms, backend=self.backend,
                recovery_point=recovery.get(tp, 0), log_start_offset=starts.get(tp, 0),
                had_clean_shutdown=self.had_clean_shutdown, cleaned_to=cleaned.get(tp, 0)))
            hw = watermarks.get(tp)
            if hw is not None:  # never past the recovered end, nor below the start
                lg.high_watermark = max(lg.log_start_offset, min(hw, lg.log_end_offset))

    def _attach(self, lg: Log) -> Log:
        """Give a log opened here the manager's per-log hooks."""
        lg.roll_listener = self._roll_listener
        window = self.manager_config.cache_drop_behind_bytes
        if window >= 0:
            lg.drop_behind = DropBehind(window, lg.active_segment)
        return lg

    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_config)

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """A topic's configs changed (AlterConfigs): its logs and the ones
        created later use ``config`` (see :meth:`Log.set_config`)."""
        with self._lock:
            self.topic_configs[topic] = config
            for (name, _), lg in self._logs.items():
                if name == topic:
                    lg.set_config(config)

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
            if self._closed:
                # A log opened now would never be closed: its preallocated
                # indexes left untrimmed under the clean-shutdown marker,
                # which the next start would find "corrupt" (a partition of
                # __consumer_offsets still being created off the loop when
                # SIGTERM came).
                raise LogClosedError(f"log manager of {self.dir} is closed")
            if config is not None:
                self.topic_configs[topic] = config
            path = self.dir / f"{topic}-{partition}"
            fresh = not path.exists()
            try:
                new = Log.open(path, self.config_for(topic), time_ms=self.time_ms,
                               backend=self.backend, had_clean_shutdown=True)
            except BaseException:
                # Out of descriptors or space: a directory made just now holds
                # nothing yet, and left behind it would be a partition no
                # topic owns (one that existed may hold data: it stays).
                if fresh:
                    _remove_fresh_log_dir(path)
                raise
            self._logs[tp] = self._attach(new)
            return new

    def set_roll_listener(self, listener: Callable[[Log, int], None] | None) -> None:
        """Call ``listener(log, new base offset)`` at every roll of every log,
        the ones created later too (see :attr:`Log.roll_listener`)."""
        with self._lock:
            self._roll_listener = listener
            for lg in self._logs.values():
                lg.roll_listener = listener

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
            self.cleaner.forget((topic, partition))
            # As Kafka's LocalLog.logDeleteDirName: the topic part is cut so the
            # name fits in 255 bytes (a 249-character topic plus the suffix
            # would not, and the rename would fail with ENAMETOOLONG).
            suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
            doomed = found.dir.with_name(topic[:255 - len(suffix)] + suffix)
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

    def _each_log(self, what: str, job: Callable[[Log], int]) -> int:
        """``job`` on every log, summed.  A log deleted meanwhile is skipped
        (its files went with it); any other I/O error takes the dir offline,
        as Kafka's ``maybeHandleIOException`` does around each of these."""
        total = 0
        for lg in list(self._logs.values()):
            try:
                total += job(lg)
            except LogClosedError:
                continue
            except OSError as exc:
                if lg.closed:
                    continue
                self.failures.fail(f"Error while {what} {lg.topic}-{lg.partition} "
                                   f"in dir {self.dir}", exc)
        return total

    def run_retention(self, now_ms: int | None = None) -> int:
        """Delete old segments of every log; returns the number deleted."""
        now = self.time_ms() if now_ms is None else now_ms
        return self._each_log("deleting segments of", lambda lg: lg.delete_old_segments(now))

    def flush_due(self, now_ms: int | None = None) -> int:
        """Flush rolled segments and logs past flush.ms; returns logs flushed."""
        now = self.time_ms() if now_ms is None else now_ms
        return self._each_log("flushing", lambda lg: lg.flush_due(now))

    def flush_rolled(self, now_ms: int | None = None) -> int:
        """Flush only segments rolled since the last flush (not flush.ms);
        returns logs flushed."""
        return self._each_log("flushing", Log.flush_rolled)

    def checkpoint(self) -> None:
        """Write the recovery points and log start offsets of every log."""
        with self._lock:
            self.checkpoint_recovery_points()
            self.checkpoint_log_start_offsets()
            self.checkpoint_high_watermarks()

    def checkpoint_recovery_points(self) -> None:
        """``recovery-point-offset-checkpoint`` of every log."""
        with self._lock:
            self._recovery_file.write(
                {tp: lg.recovery_point for tp, lg in self._logs.items()})

    def checkpoint_high_watermarks(self) -> None:
        """``replication-offset-checkpoint`` of every log."""
        with self._lock:
            self._hw_file.write({tp: lg.high_watermark for tp, lg in self._logs.items()})

    def checkpoint_log_start_offsets(self) -> None:
        """``log-start-offset-checkpoint`` of every log."""
        with self._lock:
            self._start_file.write(
                {tp: lg.log_start_offset for tp, lg in self._logs.items()})

    def drop_cold_cache(self, now_ms: int | None = None, idle_ms: int | None = None) -> int:
        """Drop the page cache of flushed inactive segments not read for
        ``idle_ms`` (default ``log.cache.drop.idle.ms``; -1 disables); returns
        the bytes advised.  See :meth:`Log.drop_cold_cache`."""
        idle = self.manager_config.cache_drop_idle_ms if idle_ms is None else idle_ms
        if idle < 0:
            return 0
        now = self.time_ms() if now_ms is None else now_ms
        return self._each_log("dropping the cache of",
                              lambda lg: lg.drop_cold_cache(now, idle))

    # -- scheduler ---------------------------------------------------------

    def _tasks(self) -> list[tuple[str, int, Callable[[int], object]]]:
        """(name, interval ms, job) of the periodic tasks that are enabled."""
        cfg = self.manager_config
        tasks: list[tuple[str, int, Callable[[int], object]]] = [
            ("retention", cfg.retention_check_interval_ms, self.run_retention),
            # Kafka's flushDirtyLogs: flush.ms is checked every
            # log.flush.scheduler.interval.ms (default Long.MaxValue: never).
            ("flush", cfg.flush_scheduler_interval_ms, self.flush_due),
            # Kafka flushes a rolled segment asynchronously right after the roll.
            ("flush-rolled", ROLLED_FLUSH_INTERVAL_MS, self.flush_rolled),
        ]
        if cfg.flush_offset_checkpoint_interval_ms > 0:
            tasks.append(("recovery-point-checkpoint", cfg.flush_offset_checkpoint_interval_ms,
                          lambda now: self.checkpoint_recovery_points()))
        if cfg.flush_start_offset_checkpoint_interval_ms > 0:
            tasks.append(("log-start-offset-checkpoint",
                          cfg.flush_start_offset_checkpoint_interval_ms,
                          lambda now: self.checkpoint_log_start_offsets()))
        tasks.append(("high-watermark-checkpoint", cfg.hw_checkpoint_interval_ms,
                      lambda now: self.checkpoint_high_watermarks()))
        if cfg.cache_drop_idle_ms >= 0:
            tasks.append(("cache-drop", cfg.retention_check_interval_ms, self.drop_cold_cache))
        return tasks

    def run_due(self, now_ms: int | None = None) -> list[str]:
        """One scheduler pass: run every task whose interval has passed since
        it last ran (or, the first time, since the first pass), and return
        their names in order.  A failing task is logged; the others still run.
        Intervals count from when a task last ran (fixed delay: a late pass
        does not make a task catch up).  An I/O error (flushing, deleting
        segments, writing a checkpoint) takes the dir offline, as Kafka's
        ``maybeHandleIOException`` around each of them does.
        """
        now = self.time_ms() if now_ms is None else now_ms
        ran: list[str] = []
        with self._pass_lock:
            for name, interval, job in self._tasks():
                if now < self._next_due.setdefault(name, now + interval):
                    continue
                self._next_due[name] = now + interval
                try:
                    job(now)
                except OSError as exc:
                    if exc.errno in (errno.EMFILE, errno.ENFILE):
                        # Out of descriptors (a flood of connections) is no
                        # failing disk: the task runs again at its next turn.
                        log.warning("periodic task %s of log dir %s skipped: %s", name,
                                    self.dir, exc)
                        self._next_due[name] = now + min(interval, 1000)
                    else:
                        self.failures.fail(f"Error in periodic task {name} of log dir "
                                           f"{self.dir}", exc)
                except Exception:
                    log.exception("periodic task %s failed", name)
                ran.append(name)
        return ran

    def start_scheduler(self) -> None:
        """Run :meth:`run_due` on a daemon thread until :meth:`stop_scheduler`
        (or :meth:`close`).  Starting twice is a no-op."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"log manager of {self.dir} is closed")
            if self._scheduler is not None and self._scheduler.is_alive():
                return
            self._stop.clear()
            self._scheduler = threading.Thread(target=self._run_scheduler,
                                               name=f"log-scheduler-{self.dir.name}",
                                               daemon=True)
            self._scheduler.start()
            self.cleaner.start()

    def stop_scheduler(self, timeout: float | None = 30.0) -> None:
        """Stop the scheduler thread and wait for the task in progress."""
        thread = self._scheduler
        self._stop.set()
        self.cleaner.stop(timeout)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._scheduler = None

    @property
    def scheduler_running(self) -> bool:
        return self._scheduler is not None and self._scheduler.is_alive()

    def _run_scheduler(self) -> None:
        while not self._stop.is_set():
            self.run_due()
            now = self.time_ms()
            wait_ms = min(self._next_due.values(), default=now + 1000) - now
            self._stop.wait(min(max(wait_ms, 1) / 1000, _MAX_WAIT_S))

    def close(self) -> None:
        """Clean shutdown: stop the scheduler, close every log (flushing it),
        checkpoint, then the marker."""
        self.stop_scheduler()
        with self._lock:
            if self._closed:
                return
            for lg in self._logs.values():
                lg.close()
            self.checkpoint()
            write_atomically(self.dir / CLEAN_SHUTDOWN_FILE, b"")
            self._closed = True
            self.dir_lock.release()


def _remove_fresh_log_dir(path: Path) -> None:
    """Remove the directory of a log that failed to open as it was made,
    without a descriptor where possible: rmtree needs one to list the
    directory, and running out of them (EMFILE) may be why the open failed.
    A new log holds at most its first segment's three files."""
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        try:
            (path / file_name(0, suffix)).unlink()
        except FileNotFoundError:
            pass
        except OSError:
            break
    try:
        path.rmdir()
    except FileNotFoundError:
        pass
    except OSError:  # something else in it
        shutil.rmtree(path, ignore_errors=True)
