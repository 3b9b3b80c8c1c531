"""Kafka's BROKER_LOGGER config resource (KIP-412, resource type 8) over
Python's ``logging``.

The resource named after this node's id lists its loggers: the root logger
as ``root`` and every logger of the ``pylog`` hierarchy that exists (the
intermediate nodes ``logging`` keeps for dotted names, such as ``pylog`` and
``pylog.server``, included, so a whole subtree can be set at once).  Each
config is a logger, its value the level in Kafka's (log4j) names.

Level mapping, Kafka -> Python (what SET stores on the logger):

    TRACE -> 5 (registered with ``logging`` as TRACE)   DEBUG -> DEBUG (10)
    INFO -> INFO (20)   WARN -> WARNING (30)   ERROR -> ERROR (40)
    FATAL -> CRITICAL (50)

Python -> Kafka (what DescribeConfigs shows, from the logger's effective
level): the lowest Kafka level the logger still emits, i.e. the first of
TRACE (<= 5, NOTSET included), DEBUG (<= 10), INFO (<= 20), WARN (<= 30),
ERROR (<= 40), FATAL (<= 50) that is >= the level, and OFF above CRITICAL.
As in Kafka, OFF is shown but cannot be set: the valid levels are Kafka's
LogLevelConfig.VALID_LOG_LEVELS (DEBUG, ERROR, FATAL, INFO, TRACE, WARN),
matched case-sensitively.

IncrementalAlterConfigs SET gives a logger its own level; DELETE unsets it
(``logging.NOTSET``), so it follows its parents again, as Kafka's
Log4jController.unsetLogLevel makes it follow root.  The checks and messages
are Kafka 3.6's ConfigAdminManager.validateLogLevelConfigs; every operation
of a resource is validated before any is applied.  Nothing is persisted, as
in Kafka: a restart brings back the levels the broker starts with.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from pylog.protocol import ErrorCode
from pylog.server.dynamic_configs import DynamicConfigError, check_node_id, check_request

log = logging.getLogger(__name__)

BROKER_LOGGER = 8
DYNAMIC_BROKER_LOGGER_CONFIG = 6
# Kafka's DescribeConfigs does not set config_type for logger entries: it
# stays at its default, UNKNOWN (0).
CONFIG_TYPE = 0
ROOT = "root"
HIERARCHY = "pylog"
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

TRACE = 5
logging.addLevelName(TRACE, "TRACE")
TO_PYTHON = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
             "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
VALID_LEVELS = ", ".join(sorted(TO_PYTHON))
_BY_THRESHOLD = sorted((v, k) for k, v in TO_PYTHON.items())


def kafka_level(level: int) -> str:
    """The Kafka name of a Python (effective) level."""
    for threshold, name in _BY_THRESHOLD:
        if level <= threshold:
            return name
    return "OFF"


def logger_names() -> list[str]:
    """``root`` first, then every logger of the pylog hierarchy, sorted."""
    known = logging.root.manager.loggerDict
    return [ROOT, *sorted(n for n in list(known)
                          if n == HIERARCHY or n.startswith(HIERARCHY + "."))]


def _effective(name: str) -> int:
    """The effective level of ``name`` without creating a logger for a
    placeholder node (its nearest real ancestor's)."""
    while name:
        node = logging.root.manager.loggerDict.get(name)
        if isinstance(node, logging.Logger):
            return node.getEffectiveLevel()
        name = name.rpartition(".")[0]
    return logging.root.getEffectiveLevel()


def levels() -> dict[str, str]:
    """Each logger's effective level, in Kafka's names."""
    return {n: kafka_level(logging.root.level if n == ROOT else _effective(n))
            for n in logger_names()}


def exists(name: str) -> bool:
    return name == ROOT or (name in logging.root.manager.loggerDict
                            and (name == HIERARCHY or name.startswith(HIERARCHY + ".")))


def describe(resource_name: str, node_id: int, keys: Iterable[str] | None) -> list[dict[str, Any]]:
    """The DescribeConfigs entries of the resource (Kafka's ConfigHelper);
    raises DynamicConfigError for a name that is not this node."""
    if not resource_name:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    try:
        given = int(resource_name)
    except ValueError:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, "Broker id must be an integer, "
                                 f"but it is: {resource_name}") from None
    if given != node_id:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected "
                                 f"{node_id} but received {resource_name}")
    wanted = set(keys) if keys else None  # null or empty: every logger
    return [{"name": name, "value": level, "read_only": False, "is_default": False,
             "config_source": DYNAMIC_BROKER_LOGGER_CONFIG, "is_sensitive": False,
             "synonyms": [], "config_type": CONFIG_TYPE, "documentation": None}
            for name, level in levels().items() if wanted is None or name in wanted]


def _validate(op: Any) -> None:
    """ConfigAdminManager.validateLogLevelConfigs of one operation."""
    name, kind = op.name, op.config_operation
    if kind in (SET, DELETE) and not exists(name):
        raise DynamicConfigError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
    if kind == SET:
        if op.value not in TO_PYTHON:
            raise DynamicConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Cannot set the log level of {name} to {op.value} as it is not a supported "
                f"log level. Valid log levels are {VALID_LEVELS}")
    elif kind == DELETE:
        if name == ROOT:
            raise DynamicConfigError(ErrorCode.INVALID_REQUEST, "Removing the log level of "
                                     f"the {ROOT} logger is not allowed")
    elif kind in (APPEND, SUBTRACT):
        verb = "APPEND" if kind == APPEND else "SUBTRACT"
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, f"{verb} operation is not allowed "
                                 "for the BROKER_LOGGER resource")
    else:
        raise DynamicConfigError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {kind} "
                                 "is not allowed for the BROKER_LOGGER resource")


def alter(resource: Any, node_id: int, validate_only: bool) -> None:
    """IncrementalAlterConfigs of one BROKER_LOGGER resource: checked whole,
    then applied unless ``validate_only``; raises DynamicConfigError."""
    ops = list(resource.configs)
    check_request((op.name for op in ops),
                  (op.name for op in ops if op.config_operation != DELETE and op.value is None))
    check_node_id(resource.resource_name, node_id)
    for op in ops:
        _validate(op)
    if validate_only:
        return
    for op in ops:
        target = logging.root if op.name == ROOT else logging.getLogger(op.name)
        if op.config_operation == SET:
            log.info("Updating the log level of %s to %s", op.name, op.value)
            target.setLevel(TO_PYTHON[op.value])
        else:
            log.info("Unset the log level of %s", op.name)
            target.setLevel(logging.NOTSET)
