"""The node's topics: names, ids, partition counts and topic configs.

Which topics exist, with their ids, partition counts and configs, is kept in
``<log.dir>/pylog-topics.json``, written atomically (tmp + fsync + rename),
and the topic id also in each partition's ``partition.metadata`` as Kafka does.
Partition logs found without an entry (a log dir from before the file) are
topics too.

CreateTopics and CreatePartitions are all or nothing across a crash, as
Kafka's single metadata record batch: the file is saved with the new topic or
partition count *before* the partition directories are made, and a restart
creates the ones a crash left missing.  Made the other way round, a crash
while a 1000-partition topic's directories were being created left the topic
with the few partitions made so far and none of its configs (a compacted topic
came back with ``cleanup.policy=delete``), and a retried CreateTopics was then
told TOPIC_ALREADY_EXISTS.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import resource
import threading
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from pylog.log import Log, LogConfig, LogManager
from pylog.log.durable import write_atomically
from pylog.protocol import ErrorCode
from pylog.protocol.errors import TopicError
from pylog.protocol.uuids import parse_uuid, uuid_text
from pylog.server import topic_configs

TOPICS_FILE = "pylog-topics.json"
PARTITION_METADATA = "partition.metadata"
MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")

log = logging.getLogger(__name__)


def storage_error(what: str, exc: OSError) -> TopicError:
    """A topic's logs could not be made (out of descriptors or space): what
    the request gets, KAFKA_STORAGE_ERROR with the cause, as Kafka maps an
    IOException at log creation to a KafkaStorageException.  Logged once here."""
    message = f"{what}: {exc}"
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        message += (f" (each partition holds five descriptors and this process may "
                    f"open {soft}: raise its hard limit, e.g. ulimit -Hn or LimitNOFILE)")
    log.error("%s", message)
    return TopicError(ErrorCode.KAFKA_STORAGE_ERROR, message)


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)  # explicitly set topic configs


def validate_name(name: str | None) -> None:
    """Kafka's topic name rules (``Topic.validate``)."""
    if not name:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name is longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL.match(name):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"topic name {name!r} holds characters other than ASCII "
                         "alphanumerics, '.', '_' and '-'")


def write_partition_metadata(partition_dir: Path, topic_id: uuid.UUID) -> None:
    """Kafka's ``partition.metadata``: the topic id beside the partition's segments."""
    path = partition_dir / PARTITION_METADATA
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"version: 0\ntopic_id: {uuid_text(topic_id)}\n")
    os.replace(tmp, path)


def load_topic_configs(log_dir: Path) -> dict[str, dict[str, str]]:
    """Topic configs from the registry file, before the logs are opened (the log
    manager needs each topic's LogConfig to load its partitions)."""
    path = Path(log_dir) / TOPICS_FILE
    if not path.exists():
        return {}
    raw = json.loads(path.read_text())
    return {name: dict(entry.get("configs", {})) for name, entry in raw.items()}


class TopicRegistry:
    def __init__(self, logs: LogManager, default_config: LogConfig) -> None:
        self.logs = logs
        self.default_config = default_config
        self.path = logs.dir / TOPICS_FILE
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self._create_lock = threading.Lock()
        # Deleted topics whose committed offsets are not yet removed, by name:
        # their "deleted" marker stays in the file until :meth:`forget`, so a
        # crash before the offsets are tombstoned removes them at the next
        # start instead of leaving them to a new topic of the same name.
        self._deleting: dict[str, Topic] = {}
        # Topics whose deletion a crash interrupted and _load finished: their
        # committed offsets are the broker's to remove once groups are loaded.
        self.finished_deletions: list[str] = []
        # Told of the partitions of each topic created or grown here
        # (name, the new partitions): the node's coordinators own those of
        # their internal topics from then on (pylog.server.internal_topics).
        self.on_created: Callable[[str, range], None] | None = None
        self._load()

    def _load(self) -> None:
        saved = json.loads(self.path.read_text()) if self.path.exists() else {}
        # A deletion that a crash interrupted: finish it (the intent was saved
        # before the first partition directory went, see delete()).
        finished = [n for n, entry in saved.items() if entry.get("deleted")]
        for name in finished:
            self.logs.delete_topic(name)
            entry = saved.pop(name)
            self._deleting[name] = Topic(name, parse_uuid(entry["id"]), 0, {})
        self.finished_deletions = finished
        counts: dict[str, int] = {}
        for topic, partition in self.logs.logs():
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        # Topics saved before their partition directories were made (see
        # create): a crash may have left some or all of those missing.
        for name, entry in saved.items():
            if int(entry.get("partitions", 0)) > 0:
                counts.setdefault(name, 0)
        changed = bool(finished)
        for name, count in counts.items():
            entry = saved.get(name, {})
            topic_id = self._read_partition_id(name) or (
                parse_uuid(entry["id"]) if "id" in entry else uuid.uuid4())
            count = max(count, int(entry.get("partitions", 0)))
            topic = Topic(name, topic_id, count, dict(entry.get("configs", {})))
            self._add(topic)
            changed = changed or name not in saved
            for p in range(count):  # a partition dir lost in a crash: recreate it
                if self.logs.get_log(name, p) is None:
                    self.logs.get_or_create_log(name, p, self.log_config(topic.configs))
                    self._write_partition_metadata(topic, p)
        if changed or len(saved) != len(self.topics):
            self._save()

    def _add(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.by_id[topic.topic_id] = topic

    def _read_partition_id(self, name: str) -> uuid.UUID | None:
        path = self.logs.dir / f"{name}-0" / PARTITION_METADATA
        try:
            for line in path.read_text().splitlines():
                key, _, value = line.partition(":")
                if key.strip() == "topic_id":
                    return parse_uuid(value.strip())
        except (OSError, ValueError):
            return None
        return None

    def _write_partition_metadata(self, topic: Topic, partition: int) -> None:
        write_partition_metadata(self.logs.dir / f"{topic.name}-{partition}", topic.topic_id)

    def _save(self) -> None:
        data = {t.name: {"id": uuid_text(t.topic_id), "partitions": t.partitions,
                         "configs": t.configs} for t in self.topics.values()}
        for t in self._deleting.values():
            data.setdefault(t.name, {"id": uuid_text(t.topic_id), "deleted": True})
        write_atomically(self.path, json.dumps(data, indent=1, sort_keys=True).encode())

    # -- queries -------------------------------------------------------------

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def log_config(self, configs: dict[str, str]) -> LogConfig:
        """The LogConfig of a topic with these explicit configs (already
        validated: see :meth:`validate_configs`)."""
        return topic_configs.log_config(configs, self.default_config)

    @staticmethod
    def validate_configs(configs: dict[str, str | None]) -> dict[str, str]:
        """Normalised configs; TopicError INVALID_CONFIG naming the bad key."""
        try:
            return topic_configs.validate(configs)
        except topic_configs.ConfigValueError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None

    # -- changes -------------------------------------------------------------

    def check_create(self, name: str, partitions: int, configs: dict[str, str]) -> LogConfig:
        validate_name(name)
        if name in self.topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if "." in name or "_" in name:  # Kafka: '.' and '_' collide in metric names
            key = name.replace(".", "_")
            for other in self.topics:
                if other.replace(".", "_") == key:
                    raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                     f"Topic '{name}' collides with existing topic: {other}")
        if partitions < 1:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             "Number of partitions must be larger than 0.")
        return self.log_config(self.validate_configs(configs))

    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None,
               only: Collection[int] | None = None) -> Topic:
        """Create ``name`` with ``partitions`` partitions.  ``only``: create
        just these partitions' logs now (the topic is registered and saved with
        all of them); the caller creates the others with
        :meth:`ensure_partition`, e.g. off the event loop, and a restart
        creates any still missing (see ``_load``)."""
        configs = self.validate_configs(dict(configs or {}))
        config = self.check_create(name, partitions, configs)
        topic = Topic(name, uuid.uuid4(), partitions, configs)
        # Saved first (see the module notes): a crash from here on leaves the
        # whole topic, with its configs, for the next start to complete.
        with self._create_lock:  # ensure_partition sees the topic once its logs are made
            self._add(topic)
            try:
                self._save()
                for p in range(partitions) if only is None else only:
                    self.logs.get_or_create_log(name, p, config)
                    self._write_partition_metadata(topic, p)
            except Exception as exc:
                # Not created (disk full, ...): nothing of it stays behind,
                # as far as the disk lets us (the first error is the one raised).
                self.topics.pop(name, None)
                self.by_id.pop(topic.topic_id, None)
                with contextlib.suppress(OSError):
                    self.logs.delete_topic(name)
                    self._save()
                if isinstance(exc, OSError):
                    raise storage_error(f"could not create topic {name}", exc) from exc
                raise
        if self.on_created is not None:
            self.on_created(name, range(partitions))
        return topic

    def ensure_partition(self, name: str, partition: int) -> Log | None:
        """The log of a registered topic's partition, created if missing (see
        ``create(only=...)``); None if the topic is gone.  Thread-safe: the
        loop and an executor thread may race to create the same partition."""
        found = self.logs.get_log(name, partition)
        if found is not None:
            return found
        with self._create_lock:
            topic = self.topics.get(name)
            if topic is None or partition >= topic.partitions:
                return None
            found = self.logs.get_log(name, partition)
            if found is None:
                try:
                    found = self.logs.get_or_create_log(name, partition,
                                                        self.log_config(topic.configs))
                    self._write_partition_metadata(topic, partition)
                except OSError as exc:
                    raise storage_error(f"could not create {name}-{partition}", exc) from exc
            return found

    def delete(self, name: str) -> Topic:
        with self._create_lock:  # not while ensure_partition creates one of its logs
            topic = self.topics.pop(name, None)
            if topic is None:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 "This server does not host this topic-partition.")
            self.by_id.pop(topic.topic_id, None)
            self._deleting[name] = topic
            self._save()  # durable intent first: a crash midway finishes it
            self.logs.delete_topic(name)
        return topic

    def forget(self, name: str) -> None:
        """A deleted topic's last trace: its marker, once what else went with
        it (committed offsets) is gone too."""
        if self._deleting.pop(name, None) is not None:
            self._save()

    def set_configs(self, name: str, configs: dict[str, str]) -> Topic:
        """Replace a topic's explicit configs (validated by the caller); the
        running logs take the new LogConfig at once, and the file is saved
        before returning so that an acknowledged change survives a crash."""
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Topic {name} does not exist")
        self.logs.update_topic_config(name, self.log_config(configs))
        topic.configs = dict(configs)
        self._save()
        return topic

    def add_partitions(self, name: str, total: int) -> Topic:
        """CreatePartitions: grow ``name`` to ``total`` partitions."""
        topic = self.topics[name]
        config = self.log_config(topic.configs)
        first = topic.partitions
        # Saved first, as in create: a crash leaves all the new partitions,
        # which the next start makes, not the few made so far.
        with self._create_lock:
            topic.partitions = total
            self._save()
            try:
                for p in range(first, total):
                    self.logs.get_or_create_log(name, p, config)
                    self._write_partition_metadata(topic, p)
            except Exception as exc:
                # Not grown (out of file descriptors, disk full): back to the
                # old count, as far as the disk lets us (the first error is
                # the one raised), or every later start would fail the same way.
                topic.partitions = first
                with contextlib.suppress(OSError):
                    for p in range(first, total):
                        if self.logs.get_log(name, p) is not None:
                            self.logs.delete_log(name, p)
                    self._save()
                if isinstance(exc, OSError):
                    raise storage_error(f"could not add partitions to {name}", exc) from exc
                raise
        if self.on_created is not None:
            self.on_created(name, range(first, total))
        return topic
