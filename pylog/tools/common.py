"""Helpers shared by the Kafka-compatible tools (``pylog topics``, ``pylog configs``, ...).

The tools use confluent-kafka (librdkafka) as their client.  Kafka's tools take
Java client properties (``--command-config``, ``--producer-property``...); most
names are the same in librdkafka, a few Java-only ones (serializers, buffer
sizes of the Java client) mean nothing to librdkafka and are dropped rather than
failing the command, and a few are renamed (or have their values translated).
A name neither client knows gets Kafka's "supplied but isn't a known config"
warning and is left out (:func:`new_client`), as Kafka's clients ignore it.

Errors follow one rule in every tool: one line on stderr, exit status 1
(:func:`run_tool`); argparse's usage errors keep argparse's status 2 and print
the tool's own usage (:class:`ToolParser`).  A Kafka flag pylog does not
implement is refused by name (:func:`refuse_flags`), never silently ignored.

Every tool that talks to a broker goes through :func:`connect_any` before its
first request (:func:`new_client` for the librdkafka tools, ``WireClient`` for
the others): where nothing listens it fails at once with the address and the
cause, instead of waiting out a client's metadata timeout.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

# Java client properties with no librdkafka counterpart: accepted, ignored.
JAVA_ONLY = frozenset({
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
    "max.block.ms", "interceptor.classes", "partitioner.class",
    "metric.reporters", "metrics.num.samples", "metrics.sample.window.ms",
    "metrics.recording.level", "max.poll.records", "exclude.internal.topics",
    "default.api.timeout.ms", "send.buffer.bytes", "receive.buffer.bytes",
    "retry.backoff.max.ms", "reconnect.backoff.max.ms", "auto.include.jmx.reporter",
    "partitioner.ignore.keys", "partitioner.adaptive.partitioning.enable",
    "partitioner.availability.timeout.ms", "internal.leave.group.on.close",
    "metadata.max.idle.ms", "socket.connection.setup.timeout.max.ms",
})
# Java name -> librdkafka name, where they differ.
RENAMED = {"max.request.size": "message.max.bytes", "fetch.max.wait.ms": "fetch.wait.max.ms",
           "buffer.memory": "queue.buffering.max.kbytes"}
# Java values librdkafka spells differently, per (librdkafka) property.
_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}
_UNKNOWN_PROPERTY = re.compile(r'^No such configuration property: "(.+)"$')
# How long one bootstrap address may take to accept a TCP connection before the
# tool names it unreachable (Kafka's clients wait up to 10 s per attempt, and
# then retry for the whole API timeout; an operator wants the cause at once).
CONNECT_TIMEOUT_S = 3.0
# The security protocols a pylog broker serves (its listeners are PLAINTEXT).
SECURITY_PROTOCOLS = ("PLAINTEXT",)

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


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's, except that text is never broken at a hyphen (a flag such as
    ``--zk-tls-config-file`` named in a description stays whole)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return textwrap.fill(self._whitespace_matcher.sub(" ", text).strip(), width,
                             initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False)


class ToolParser(argparse.ArgumentParser):
    """The parser of one tool (``pylog topics``...), used for every subcommand.

    argparse hands a flag a subcommand does not know back to the top-level
    parser, which then printed ``pylog``'s usage; here the tool itself refuses
    it with its own usage, as Kafka's tools print theirs.  No abbreviations
    (``--part`` for ``--partitions``): Kafka's option parser takes none.
    ``--version`` as in Kafka's CommandDefaultOptions."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)
        from pylog import __version__

        self.add_argument("--version", action="version", version=f"pylog {__version__}",
                          help="display the pylog version")

    def parse_known_args(self, args: Any = None, namespace: Any = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        args = sys.argv[1:] if args is None else list(args)
        # An unknown flag is named first, as Kafka's option parser does, not
        # hidden behind "the following arguments are required".
        unknown = self._unknown_flags(args)
        if unknown:
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def _unknown_flags(self, args: list[str]) -> list[str]:
        """The ``--name`` arguments this parser has no option for, up to its
        subcommand (whose parser checks the rest) or ``--``."""
        commands: set[str] = set()
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                commands.update(action.choices)
        unknown = []
        for arg in args:
            if arg == "--" or arg in commands:
                break
            if arg.startswith("--") and arg.split("=", 1)[0] not in self._option_string_actions:
                unknown.append(arg)
        return unknown


class _Unsupported(argparse.Action):
    """A Kafka flag pylog does not implement: a usage error naming it."""

    def __init__(self, option_strings: list[str], dest: str, reason: str = "",
                 **kwargs: Any) -> None:
        # Takes a value or none (as the Kafka flag may), so the flag itself
        # is what gets reported, not a missing or stray value.
        super().__init__(option_strings, argparse.SUPPRESS, nargs="?",
                         default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        self.reason = reason

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        reason = f": {self.reason}" if self.reason else ""
        parser.error(f"{option_string} is not supported by pylog{reason}")


def refuse_flags(parser: argparse.ArgumentParser, flags: Mapping[str, str]) -> None:
    """Kafka's flags (``--flag``: why) this tool refuses by name, listed under
    its help."""
    for flag, reason in flags.items():
        parser.add_argument(flag, action=_Unsupported, reason=reason)
    names = ", ".join(flags)
    parser.epilog = ((parser.epilog + "\n") if parser.epilog else "") + (
        f"Kafka options pylog does not support: {names}.")


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """``host:port[,host:port]`` -> addresses (IPv6 hosts in brackets; a
    ``PLAINTEXT://`` prefix, as librdkafka takes, is dropped)."""
    out = []
    for item in (s.strip() for s in bootstrap.split(",")):
        if not item:
            continue
        address = item.split("://", 1)[-1]
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit():
            raise ToolError(f"Invalid url in bootstrap.servers: {item}")
        out.append((host.strip("[]") or "localhost", int(port)))
    if not out:
        raise ToolError("No resolvable bootstrap urls given in bootstrap.servers")
    return out


def _connect_error(exc: OSError, timeout: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout:g} s"
    return exc.strerror or str(exc) or type(exc).__name__


def connect_any(addresses: list[tuple[str, int]], timeout: float = CONNECT_TIMEOUT_S
                ) -> tuple[socket.socket, tuple[str, int]]:
    """A TCP connection to the first address that takes one, and that address.
    None does: a ToolError naming every address and why it failed (refused,
    unresolvable, no answer within ``timeout``), so a tool never waits out a
    client timeout to say "Timed out waiting for a node assignment"."""
    errors = []
    for host, port in addresses:
        try:
            return socket.create_connection((host, port), timeout=timeout), (host, port)
        except OSError as exc:
            errors.append(f"{host}:{port} ({_connect_error(exc, timeout)})")
    raise ToolError(f"Cannot connect to the broker at {', '.join(errors)}")


def require_reachable(bootstrap: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Fail fast, naming the address and the cause, unless some bootstrap
    server accepts a TCP connection."""
    sock, _ = connect_any(parse_bootstrap(bootstrap), timeout)
    sock.close()


def check_security(props: Mapping[str, str]) -> None:
    """Refuse a ``security.protocol`` no pylog broker serves, by name, instead
    of failing later in a TLS or SASL handshake."""
    protocol = props.get("security.protocol")
    if protocol is not None and protocol.strip().upper() not in SECURITY_PROTOCOLS:
        raise ToolError(f"security.protocol={protocol} is not supported by pylog: its brokers "
                        "serve PLAINTEXT only")


def wire_config(args: argparse.Namespace) -> dict[str, str]:
    """``--command-config`` of a tool that speaks the protocol itself (no
    client library): read and checked; its ``request.timeout.ms`` is the
    request timeout (:func:`wire_timeout`), the rest concerns clients pylog's
    codec does not have (retries, buffers) and is not used."""
    path = getattr(args, "command_config", None)
    props = read_properties_file(path) if path else {}
    check_security(props)
    return props


def wire_timeout(props: Mapping[str, str], default: float) -> float:
    """``request.timeout.ms`` from ``props`` in seconds, else ``default``."""
    raw = props.get("request.timeout.ms")
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ToolError(f"Invalid value {raw} for configuration request.timeout.ms: "
                        "Not a number of type INT") from None
    if value <= 0:
        raise ToolError(f"Invalid value {raw} for configuration request.timeout.ms")
    return value / 1000


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


def parse_props(items: Iterable[str] | None, what: str = "property",
                strip: bool = False) -> dict[str, str]:
    """``k=v`` items (repeatable flags, or ``k=v`` lists as --producer-props takes).

    Split on the first ``=`` and kept verbatim, as Kafka's parseKeyValueArgs
    does: ``key.separator=' '`` is a space.  ``strip`` is for the flags whose
    Kafka parser trims (``topics --config`` splits on ``\\s*=\\s*``)."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"Invalid {what} {item!r}: expected key=value")
        out[key.strip() if strip else key] = value.strip() if strip else value
    return out


def split_list(text: str) -> list[str]:
    """Kafka's comma-separated ``k=v,k2=v2`` form (``--add-config``)."""
    return [s.strip() for s in text.split(",") if s.strip()]


def _librdkafka_value(key: str, value: str) -> str:
    """A Java client value in librdkafka's spelling (``key`` is librdkafka's name)."""
    if key == "auto.offset.reset" and value.strip().lower() == "none":
        return "error"  # both fail the consumer when there is no committed offset
    if key == "partition.assignment.strategy":
        return ",".join(_ASSIGNORS.get(s.strip(), s.strip()) for s in value.split(","))
    if key == "queue.buffering.max.kbytes" and value.strip().isdigit():  # buffer.memory: bytes
        return str(max(1, -(-int(value) // 1024)))
    return value


def librdkafka_config(props: Mapping[str, str]) -> dict[str, Any]:
    """Java client properties -> a librdkafka configuration."""
    out: dict[str, Any] = {}
    for key, value in props.items():
        if key in JAVA_ONLY:
            continue
        name = RENAMED.get(key, key)
        out[name] = _librdkafka_value(name, value)
    return out


def warn_unknown_config(name: str, client: str) -> None:
    """Kafka's AbstractConfig.logUnused line, in the tools' log4j layout."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S") + f",{int(time.time() * 1000) % 1000:03d}"
    print(f"[{stamp}] WARN The configuration '{name}' was supplied but isn't a known "
          f"config. (org.apache.kafka.clients.{client})", file=sys.stderr, flush=True)


def new_client(factory: Callable[[dict[str, Any]], Any], conf: dict[str, Any]) -> Any:
    """``factory(conf)`` (Producer, Consumer, AdminClient), once a bootstrap
    server takes a connection (:func:`require_reachable`); a property librdkafka
    does not know is dropped with Kafka's warning instead of failing the tool,
    since Kafka's clients only warn about unknown names."""
    from confluent_kafka import KafkaException

    conf = dict(conf)
    check_security(conf)
    require_reachable(str(conf.get("bootstrap.servers", "")))
    client = {"Producer": "producer.ProducerConfig", "Consumer": "consumer.ConsumerConfig"
              }.get(getattr(factory, "__name__", ""), "admin.AdminClientConfig")
    while True:
        try:
            return factory(conf)
        except KafkaException as exc:
            unknown = _UNKNOWN_PROPERTY.match(error_text(exc))
            if unknown is None or unknown.group(1) not in conf:
                raise ToolError(error_text(exc)) from None
            del conf[unknown.group(1)]
            warn_unknown_config(unknown.group(1), client)


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


def bootstrap_of(args: argparse.Namespace) -> str | None:
    """--bootstrap-server, else Kafka's deprecated --broker-list (ignored when
    --bootstrap-server is given, as in Kafka)."""
    return args.bootstrap_server or getattr(args, "broker_list", None)


def admin_client(args: argparse.Namespace) -> Any:
    """An AdminClient from ``--bootstrap-server`` and ``--command-config``."""
    from confluent_kafka.admin import AdminClient

    conf = client_config(bootstrap_of(args), files=[getattr(args, "command_config", None)])
    return new_client(AdminClient, conf)


def add_bootstrap(p: argparse.ArgumentParser, required: bool = True,
                  command_config: bool = True, broker_list: bool = False) -> None:
    """--bootstrap-server (and --command-config); ``broker_list``: also Kafka's
    deprecated --broker-list, and then neither is required by the parser
    (:func:`client_config` says which is missing)."""
    p.add_argument("--bootstrap-server", required=required and not broker_list,
                   metavar="server to connect to",
                   help="REQUIRED: the Kafka server to connect to (host:port[,...])")
    if broker_list:
        p.add_argument("--broker-list", metavar="broker-list",
                       help="DEPRECATED, use --bootstrap-server instead; ignored if "
                            "--bootstrap-server is specified")
    if command_config:
        p.add_argument("--command-config", metavar="command config property file",
                       help="property file with configs for the admin client")


def json_field(obj: Any, name: str, kind: str) -> Any:
    """Kafka's ``JsonObject(name).to[T]`` on a parsed JSON file (the admin tools'
    input files): the field, of the type named ``String``, ``Int`` or
    ``Seq[Int]``/``Seq[String]``; a ToolError with Kafka's words otherwise."""
    if not isinstance(obj, dict):
        raise ToolError(f"Expected JSON object, received {json.dumps(obj)}")
    if name not in obj:
        raise ToolError(f"No such field exists: `{name}`")
    value = obj[name]
    item = kind[4:-1] if kind.startswith("Seq[") else None
    ok = _json_is(value, kind) if item is None else (
        isinstance(value, list) and all(_json_is(v, item) for v in value))
    if not ok:
        raise ToolError(f"Expected `{kind}` value, received {json.dumps(value)}")
    return value


def _json_is(value: Any, kind: str) -> bool:
    if kind == "Int":
        return type(value) is int and -2**31 <= value < 2**31
    return isinstance(value, str)


def print_metrics_table(values: Mapping[str, float]) -> None:
    """Kafka's ToolsUtils.printMetrics table (``--print-metrics``): each metric's
    group:name:{tags} and value, sorted by name."""
    width = max([len("Metric Name"), *map(len, values)])
    print(f"\n{'Metric Name':<{width}}   Value")
    for key in sorted(values):
        print(f"{key:<{width}} : {float(values[key]):.3f}")


# Error codes whose Java exception class is not the code's name in CamelCase.
_EXCEPTIONS = {
    "UNKNOWN_SERVER_ERROR": "UnknownServerException",
    "CORRUPT_MESSAGE": "CorruptRecordException",
    "REQUEST_TIMED_OUT": "TimeoutException",
    "NETWORK_EXCEPTION": "NetworkException",
    "CLUSTER_AUTHORIZATION_FAILED": "ClusterAuthorizationException",
    "TOPIC_AUTHORIZATION_FAILED": "TopicAuthorizationException",
    "GROUP_AUTHORIZATION_FAILED": "GroupAuthorizationException",
}
# The default message of the errors the replication tools meet (Kafka's
# Errors enum), for a response that carries none of its own.
_MESSAGES = {
    "UNKNOWN_SERVER_ERROR": "The server experienced an unexpected error when processing the "
                            "request.",
    "UNKNOWN_TOPIC_OR_PARTITION": "This server does not host this topic-partition.",
    "REQUEST_TIMED_OUT": "The request timed out.",
    "NOT_CONTROLLER": "This is not the correct controller for this cluster.",
    "INVALID_REQUEST": "This most likely occurs because of a request being malformed by the "
                       "client library or the message was sent to an incompatible broker. See "
                       "the broker logs for more details.",
    "CLUSTER_AUTHORIZATION_FAILED": "Cluster authorization failed.",
    "TOPIC_AUTHORIZATION_FAILED": "Topic authorization failed.",
    "INVALID_REPLICA_ASSIGNMENT": "Replica assignment is invalid.",
    "PREFERRED_LEADER_NOT_AVAILABLE": "The preferred leader was not available.",
    "ELIGIBLE_LEADERS_NOT_AVAILABLE": "Eligible topic partition leaders are not available.",
    "ELECTION_NOT_NEEDED": "Leader election not needed for topic partition.",
    "NO_REASSIGNMENT_IN_PROGRESS": "No partition reassignment is in progress.",
}


def exception_name(code: int) -> str:
    """The Java exception class of an error code, as Kafka's tools print it
    (KAFKA_STORAGE_ERROR -> ``KafkaStorageException``)."""
    from pylog.protocol import error_name

    name = error_name(code)
    return _EXCEPTIONS.get(name) or "".join(w.capitalize() for w in name.split("_")) + "Exception"


def error_message(code: int, message: str | None = None) -> str:
    """What the Java exception's getMessage says: the broker's message, else
    the error's default one (else the error's name)."""
    from pylog.protocol import error_name

    if message:
        return message
    name = error_name(code)
    return _MESSAGES.get(name, name)


def java_exception(code: int, message: str | None = None) -> str:
    """A Java exception's toString, as Kafka's tools print a failure:
    ``org.apache.kafka.common.errors.NotControllerException: <message>``."""
    return f"org.apache.kafka.common.errors.{exception_name(code)}: {error_message(code, message)}"


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


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread: the tools stop as on Ctrl-C (flush,
    commit, close), as Kafka's shutdown hooks run on SIGTERM too."""


# Set once SIGTERM arrived: the tool then exits 143 (128 + 15) like the JVM does
# after running its shutdown hooks, whatever the tool's own status.
SIGTERM_RECEIVED: list[bool] = []


def _on_sigterm(signum: int, frame: Any) -> None:
    if SIGTERM_RECEIVED:
        return  # already shutting down: a second signal must not cut the cleanup short
    SIGTERM_RECEIVED.append(True)
    raise Terminated


def run_tool(func: Callable[[argparse.Namespace], int | None]
             ) -> Callable[[argparse.Namespace], int]:
    """Wrap a tool's entry point: errors become one stderr line and exit 1."""

    def wrapper(args: argparse.Namespace) -> int:
        if threading.current_thread() is threading.main_thread():  # signal's rule
            signal.signal(signal.SIGTERM, _on_sigterm)
        status = _run(func, args)
        return 143 if SIGTERM_RECEIVED else status

    wrapper.__name__ = getattr(func, "__name__", "tool")
    wrapper.__doc__ = func.__doc__
    return wrapper


def _run(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    """``func(args)``'s status, its errors reported as one line."""
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
