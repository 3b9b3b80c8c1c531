"""Helpers shared by the Kafka-compatible tools (``pylog topics``, ``pylog configs``, ...).

The tools use confluent-kafka (librdkafka) as their client.  Kafka's tools take
Java client properties (``--command-config``, ``--producer-property``...); most
names are the same in librdkafka, a few Java-only ones (serializers, buffer
sizes of the Java client) mean nothing to librdkafka and are dropped rather than
failing the command, and a few are renamed.

Errors follow one rule in every tool: one line on stderr, exit status 1
(:func:`run_tool`); argparse's usage errors keep argparse's status 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

# Java client properties with no librdkafka counterpart: accepted, ignored.
JAVA_ONLY = frozenset({
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
    "buffer.memory", "max.block.ms", "interceptor.classes", "partitioner.class",
    "metric.reporters", "metrics.num.samples", "metrics.sample.window.ms",
    "metrics.recording.level", "max.poll.records", "exclude.internal.topics",
    "default.api.timeout.ms", "send.buffer.bytes", "receive.buffer.bytes",
    "retry.backoff.max.ms", "reconnect.backoff.max.ms", "auto.include.jmx.reporter",
    "partitioner.ignore.keys", "partitioner.adaptive.partitioning.enable",
    "partitioner.availability.timeout.ms", "internal.leave.group.on.close",
})
# Java name -> librdkafka name, where they differ.
RENAMED = {"max.request.size": "message.max.bytes"}

# librdkafka logs connection failures to stderr on its own; the tools report
# errors themselves (one line), so its logger goes nowhere.
QUIET_LOGGER = logging.getLogger("pylog.tools.rdkafka")
QUIET_LOGGER.addHandler(logging.NullHandler())
QUIET_LOGGER.propagate = False


# Fatal client-level errors librdkafka reported through error_cb (every broker
# down, name resolution failed); a tool is one process, so one list will do.
CLIENT_ERRORS: list[str] = []


def _on_client_error(err: Any) -> None:
    from confluent_kafka import KafkaError

    if err.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE) or err.fatal():
        CLIENT_ERRORS.append(err.str())


class ToolError(Exception):
    """A failure the tool reports as one line and exit status 1."""


def read_properties_file(path: str) -> dict[str, str]:
    """A Java properties file (``--command-config``, ``--producer.config``)."""
    from pylog.server.config import ConfigError, read_properties

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ToolError(f"cannot read properties file {path}: {exc.strerror}") from None
    try:
        return read_properties(text, path)
    except ConfigError as exc:
        raise ToolError(str(exc)) from None


def parse_props(items: Iterable[str] | None, what: str = "property") -> dict[str, str]:
    """``k=v`` items (repeatable flags, or ``k=v`` lists as --producer-props takes)."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"Invalid {what} {item!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


def split_list(text: str) -> list[str]:
    """Kafka's comma-separated ``k=v,k2=v2`` form (``--add-config``)."""
    return [s.strip() for s in text.split(",") if s.strip()]


def librdkafka_config(props: Mapping[str, str]) -> dict[str, Any]:
    """Java client properties -> a librdkafka configuration."""
    out: dict[str, Any] = {}
    for key, value in props.items():
        if key in JAVA_ONLY:
            continue
        out[RENAMED.get(key, key)] = value
    return out


def client_config(bootstrap: str | None, *, files: Iterable[str | None] = (),
                  props: Mapping[str, str] | None = None,
                  defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Defaults < properties files < ``k=v`` properties < ``--bootstrap-server``."""
    merged: dict[str, str] = {}
    for path in files:
        if path:
            merged.update(read_properties_file(path))
    merged.update(props or {})
    conf: dict[str, Any] = dict(defaults or {})
    conf.update(librdkafka_config(merged))
    if bootstrap:
        conf["bootstrap.servers"] = bootstrap
    if not conf.get("bootstrap.servers"):
        raise ToolError("Missing required argument \"[bootstrap-server]\"")
    conf.setdefault("logger", QUIET_LOGGER)
    conf.setdefault("error_cb", _on_client_error)
    return conf


def admin_client(args: argparse.Namespace) -> Any:
    """An AdminClient from ``--bootstrap-server`` and ``--command-config``."""
    from confluent_kafka.admin import AdminClient

    conf = client_config(args.bootstrap_server, files=[getattr(args, "command_config", None)])
    try:
        return AdminClient(conf)
    except Exception as exc:  # KafkaException: a bad property
        raise ToolError(error_text(exc)) from None


def add_bootstrap(p: argparse.ArgumentParser, required: bool = True,
                  command_config: bool = True) -> None:
    p.add_argument("--bootstrap-server", required=required, metavar="server to connect to",
                   help="REQUIRED: the Kafka server to connect to (host:port[,...])")
    if command_config:
        p.add_argument("--command-config", metavar="command config property file",
                       help="property file with configs for the admin client")


def error_text(exc: BaseException) -> str:
    """A librdkafka error as Kafka's tools word it: the broker's message when it
    sent one, else librdkafka's description."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err: KafkaError = exc.args[0]
        text = err.str()
        if err.code() == KafkaError._TRANSPORT or err.code() == KafkaError._TIMED_OUT:
            return f"Timed out waiting for a node assignment ({text})"
        return text
    if isinstance(exc, KafkaError):
        return exc.str()
    return str(exc) or type(exc).__name__


def wait_future(fut: Any, timeout: float = 30.0) -> Any:
    """The result of an AdminClient future, librdkafka's errors as :class:`ToolError`."""
    from concurrent.futures import TimeoutError as FutureTimeout

    try:
        return fut.result(timeout=timeout)
    except FutureTimeout:
        raise ToolError("Timed out waiting for a node assignment.") from None


def check_reachable(admin: Any, timeout: float = 10.0, topic: str | None = None) -> Any:
    """Cluster metadata, or a ToolError when no broker answers (librdkafka
    retries forever otherwise).  Gives up early once librdkafka reports every
    broker down (a refused connection), instead of waiting out the timeout."""
    import time

    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout
    while True:
        step = max(min(1.0, deadline - time.monotonic()), 0.01)
        try:
            return admin.list_topics(topic, timeout=step)
        except KafkaException as exc:
            admin.poll(0)  # serves error_cb
            if CLIENT_ERRORS or time.monotonic() >= deadline:
                detail = CLIENT_ERRORS[-1] if CLIENT_ERRORS else error_text(exc)
                raise ToolError(f"Timed out waiting for a node assignment ({detail})") from None


def run_tool(func: Callable[[argparse.Namespace], int | None]
             ) -> Callable[[argparse.Namespace], int]:
    """Wrap a tool's entry point: errors become one stderr line and exit 1."""

    def wrapper(args: argparse.Namespace) -> int:
        try:
            return int(func(args) or 0)
        except ToolError as exc:
            print(str(exc), file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            # `pylog console-consumer ... | head`: the reader left; not an error.
            try:
                sys.stdout.close()
            except OSError:
                pass
            return 0
        except Exception as exc:  # librdkafka errors, OSError: still one line
            print(f"Error: {error_text(exc)}", file=sys.stderr)
            return 1

    wrapper.__name__ = getattr(func, "__name__", "tool")
    wrapper.__doc__ = func.__doc__
    return wrapper
