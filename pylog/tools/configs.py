"""``pylog configs``: Kafka's ``kafka-configs.sh`` (ConfigCommand) for topics, brokers
and client quotas.

``--describe`` prints, as Kafka 3.6 does::

    Dynamic configs for topic T are:
      retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, ...}

(``--all``: every config, header ``All configs for ...``).  ``--alter`` with
``--add-config k=v,k2=[a,b]`` and/or ``--delete-config k,k2`` sends one
IncrementalAlterConfigs request and prints ``Completed updating config for
topic T.``.  Errors are one line on stderr, exit status 1.

The cluster-wide broker default (``--entity-default``, ``--broker-defaults``)
is the BROKER resource named ``""``; confluent-kafka refuses that name, so
those requests go over pylog's own codec (pylog.tools.wire).  Every
``--describe`` does: librdkafka keys a config's synonyms by name, which
loses all but one where a key is listed from two sources (a
``server.properties`` value and its default).

``--entity-type broker-loggers --entity-name ID`` (KIP-412) describes and
changes a broker's logger levels as Kafka's ConfigCommand does (header
``Dynamic configs for broker-logger 0 are:``, ``--add-config
pylog.server=DEBUG``, ``--delete-config pylog.server``; a logger the broker
does not list is refused with ``Invalid broker logger(s): ...``); those go
over pylog's own codec too, as confluent-kafka has no BROKER_LOGGER type.

Client quotas (``--entity-type users``, ``clients``, or ``users`` then
``clients`` for a (user, client-id) pair; ``--entity-default`` for a default)
go over pylog's codec as DescribeClientQuotas and AlterClientQuotas, as
confluent-kafka has neither.  They print as Kafka 3.6 does:
``Quota configs for client-id 'c1' are producer_byte_rate=1024.0`` and
``Completed updating config for client c1.``.
"""

from __future__ import annotations

import argparse
import sys
from types import SimpleNamespace
from typing import Any

from pylog.protocol import ApiKey, error_name
from pylog.tools.common import (
    ToolError,
    add_bootstrap,
    admin_client,
    check_reachable,
    error_text,
    parse_bootstrap,
    read_properties_file,
    refuse_flags,
    run_tool,
    split_list,
    wait_future,
    wire_config,
    wire_timeout,
)
from pylog.tools.wire import WireClient

TIMEOUT_S = 30.0
TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC on the wire
BROKER_RESOURCE = 4  # ConfigResource.Type.BROKER on the wire
# _resources' stand-in for the broker default, which no ConfigResource can name.
BROKER_DEFAULT = None
BROKER_LOGGER_RESOURCE = 8  # ConfigResource.Type.BROKER_LOGGER on the wire
ENTITY_TYPES = ("topics", "brokers", "broker-loggers", "users", "clients", "ips")
QUOTA_ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
DEFAULT = ""  # --entity-default's place among the entity names, as Kafka's ConfigCommand
# ConfigCommand's entity shortcuts, in its order: (flag dest, entity type); the
# named ones first, then the defaults.
ENTITY_FLAGS = (("topic", "topics"), ("client", "clients"), ("user", "users"),
                ("broker", "brokers"), ("broker_logger", "broker-loggers"), ("ip", "ips"))
DEFAULT_FLAGS = (("client_defaults", "clients"), ("user_defaults", "users"),
                 ("broker_defaults", "brokers"), ("ip_defaults", "ips"))


def _fail(reason: str) -> ToolError:
    argv = sys.argv[2:] if len(sys.argv) > 1 and sys.argv[1] == "configs" else []
    return ToolError(f"Error while executing config command with args '{' '.join(argv)}': "
                     f"{reason}")


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's ``k1=v1,k2=[v1,v2]``: commas inside brackets belong to the value."""
    out: dict[str, str] = {}
    items: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    for item in (s.strip() for s in items):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolError(f"Invalid entity config: all configs to be added must be in the "
                            f"format \"key=val\", got {item!r}")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def _source_name(source: Any) -> str:
    """Kafka prints ConfigSource names; librdkafka gives synonyms' sources as ints."""
    from confluent_kafka.admin import ConfigSource

    if isinstance(source, int):
        try:
            return ConfigSource(source).name
        except ValueError:
            return str(source)
    return getattr(source, "name", str(source))


def _entry_line(entry: Any) -> str:
    synonyms = ", ".join(f"{_source_name(s.source)}:{s.name}={_text(s.value)}"
                         for s in entry.synonyms)
    value = None if entry.is_sensitive else entry.value
    return (f"  {entry.name}={_text(value)} sensitive={str(entry.is_sensitive).lower()} "
            f"synonyms={{{synonyms}}}")


def _text(value: Any) -> str:
    return "null" if value is None else str(value)


def _resources(admin: Any, args: argparse.Namespace) -> list[tuple[Any, str]]:
    """(ConfigResource, label for the header) for each entity to act on."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    if args.entity_type == "topics":
        if args.entity_name is not None:
            names = [args.entity_name]
        elif args.alter:
            raise ToolError("an entity name must be specified with --alter of topics")
        else:
            try:  # every topic, internal ones included, as Kafka's listInternal(true)
                names = sorted(check_reachable(admin).topics)
            except ToolError as exc:
                raise _fail(str(exc)) from None
        return [(ConfigResource(ResourceType.TOPIC, n), f"topic {n}") for n in names]
    if args.entity_default:
        return [(BROKER_DEFAULT, "")]
    if args.entity_name is not None:
        if not args.entity_name.isdigit():
            raise ToolError(f"The entity name for brokers must be a valid integer broker id, "
                            f"but it is: {args.entity_name}")
        ids = [args.entity_name]
    elif args.alter:
        raise ToolError("an entity name or --entity-default must be specified with --alter "
                        "of brokers")
    else:
        try:
            ids = [str(b) for b in sorted(check_reachable(admin).brokers)]
        except ToolError as exc:
            raise _fail(str(exc)) from None
        # Every broker, then the cluster-wide default, as Kafka's describe lists them.
        return [(ConfigResource(ResourceType.BROKER, i), f"broker {i}") for i in ids] + [
            (BROKER_DEFAULT, "")]
    return [(ConfigResource(ResourceType.BROKER, i), f"broker {i}") for i in ids]


def _logger_ids(admin: Any, args: argparse.Namespace) -> list[str]:
    if args.entity_name is not None:
        if not args.entity_name.isdigit():
            raise ToolError(f"The entity name for broker-loggers must be a valid integer "
                            f"broker id, but it is: {args.entity_name}")
        return [args.entity_name]
    if args.alter:
        raise ToolError("an entity name must be specified with --alter of broker-loggers")
    try:
        return [str(b) for b in sorted(check_reachable(admin).brokers)]
    except ToolError as exc:
        raise _fail(str(exc)) from None


def _describe_loggers_of(args: argparse.Namespace, node: str) -> dict[str, Any]:
    result = _wire_request(args, ApiKey.DESCRIBE_CONFIGS, {
        "resources": [{"resource_type": BROKER_LOGGER_RESOURCE, "resource_name": node,
                       "configuration_keys": None}],
        "include_synonyms": True})
    return {c.name: c.value for c in result.configs}


def _broker_loggers(admin: Any, args: argparse.Namespace) -> None:
    """--describe / --alter of --entity-type broker-loggers."""
    from confluent_kafka.admin import AlterConfigOpType

    if args.describe:
        for node in _logger_ids(admin, args):
            # Every logger's source is DYNAMIC_BROKER_LOGGER_CONFIG: --all or not,
            # Kafka lists them all.
            print(f"{'All' if args.all else 'Dynamic'} configs for broker-logger {node} are:")
            for name, level in sorted(_describe_loggers_of(args, node).items()):
                print(f"  {name}={_text(level)} sensitive=false synonyms={{}}")
        return
    added, deleted = _changes(args)
    (node,) = _logger_ids(admin, args)
    known = _describe_loggers_of(args, node)
    unknown = [k for k in [*deleted, *added] if k not in known]
    if unknown:
        raise ToolError(f"Invalid broker logger(s): {','.join(unknown)}")
    ops = [{"name": k, "config_operation": AlterConfigOpType.SET.value, "value": v}
           for k, v in added.items()]
    ops += [{"name": k, "config_operation": AlterConfigOpType.DELETE.value, "value": ""}
            for k in deleted]
    _wire_request(args, ApiKey.INCREMENTAL_ALTER_CONFIGS, {
        "resources": [{"resource_type": BROKER_LOGGER_RESOURCE, "resource_name": node,
                       "configs": ops}],
        "validate_only": False})
    print(f"Completed updating config for broker-logger {node}.")


def _wire_client(args: argparse.Namespace,
                 addresses: list[tuple[str, int]] | None = None) -> WireClient:
    """A connection for the requests confluent-kafka cannot send (see above),
    to ``addresses`` (the bootstrap servers unless given)."""
    return WireClient(addresses or parse_bootstrap(args.bootstrap_server),
                      wire_timeout(wire_config(args), TIMEOUT_S))


def _wire_request(args: argparse.Namespace, api_key: ApiKey, body: dict[str, Any],
                  addresses: list[tuple[str, int]] | None = None) -> Any:
    """The one result of a request, its error as a ToolError."""
    with _wire_client(args, addresses) as client:
        resp = client.request(api_key, body)
    results = resp.results if api_key == ApiKey.DESCRIBE_CONFIGS else resp.responses
    (result,) = results
    if result.error_code:
        raise _fail(result.error_message or error_name(result.error_code))
    return result


def _describe_wire(args: argparse.Namespace, resource_type: int, name: str,
                   addresses: list[tuple[str, int]] | None = None) -> dict[str, Any]:
    """One resource's entries, shaped like confluent-kafka's ConfigEntry but
    with the synonyms as the broker lists them: librdkafka keys synonyms by
    name, so one key's STATIC_BROKER_CONFIG and DEFAULT_CONFIG values would
    collapse into the last one."""
    result = _wire_request(args, ApiKey.DESCRIBE_CONFIGS, {
        "resources": [{"resource_type": resource_type, "resource_name": name,
                       "configuration_keys": None}],
        "include_synonyms": True}, addresses)
    return {c.name: SimpleNamespace(name=c.name, value=c.value, is_sensitive=c.is_sensitive,
                                    source=c.config_source, synonyms=list(c.synonyms))
            for c in result.configs}


def _alter_default(args: argparse.Namespace, added: dict[str, str],
                   deleted: list[str]) -> None:
    from confluent_kafka.admin import AlterConfigOpType

    ops = [{"name": k, "config_operation": AlterConfigOpType.SET.value, "value": v}
           for k, v in added.items()]
    ops += [{"name": k, "config_operation": AlterConfigOpType.DELETE.value, "value": None}
            for k in deleted]
    _wire_request(args, ApiKey.INCREMENTAL_ALTER_CONFIGS, {
        "resources": [{"resource_type": BROKER_RESOURCE, "resource_name": "",
                       "configs": ops}],
        "validate_only": False})


def _describe_one(admin: Any, resource: Any, args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ResourceType

    if resource is BROKER_DEFAULT:
        return _describe_wire(args, BROKER_RESOURCE, "")
    if resource.restype == ResourceType.TOPIC:
        return _describe_wire(args, TOPIC_RESOURCE, resource.name)
    # A broker's configs come from that broker, as Kafka's admin client asks it.
    try:
        node = check_reachable(admin).brokers.get(int(resource.name))
    except ToolError as exc:
        raise _fail(str(exc)) from None
    if node is not None:
        return _describe_wire(args, BROKER_RESOURCE, resource.name, [(node.host, node.port)])
    # Not a broker of the cluster: librdkafka waits for it to appear, as Kafka's
    # admin client does, and the tool reports the time-out.
    fut = admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource]
    try:
        entries = wait_future(fut, TIMEOUT_S)
    except KafkaException as exc:
        raise _fail(error_text(exc)) from None
    return {k: SimpleNamespace(name=e.name, value=e.value, is_sensitive=e.is_sensitive,
                               source=e.source, synonyms=list(e.synonyms.values()))
            for k, e in entries.items()}


def _describe(admin: Any, args: argparse.Namespace) -> None:
    for resource, label in _resources(admin, args):
        entries = _describe_one(admin, resource, args).values()
        if not args.all:
            wanted = _dynamic_source(args.entity_type, label)
            entries = [e for e in entries if _source_value(e.source) == wanted]
        if not label:  # Kafka's header for the broker default, --all or not
            print("Default configs for brokers in the cluster are:")
        else:
            print(f"{'All' if args.all else 'Dynamic'} configs for {label} are:")
        for entry in sorted(entries, key=lambda e: e.name):
            print(_entry_line(entry))


def _dynamic_source(entity_type: str, label: str) -> int:
    """The ConfigSource a plain --describe shows for this entity."""
    from confluent_kafka.admin import ConfigSource

    if entity_type == "topics":
        return ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    if label:
        return ConfigSource.DYNAMIC_BROKER_CONFIG.value
    return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value


def _source_value(source: Any) -> int:
    return getattr(source, "value", source)


def _changes(args: argparse.Namespace) -> tuple[dict[str, str], list[str]]:
    """The configs to add and the ones to delete, checked as Kafka checks them."""
    added: dict[str, str] = {}
    if args.add_config_file:
        added.update(read_properties_file(args.add_config_file))
    if args.add_config:
        added.update(parse_add_config(args.add_config))
    deleted = split_list(args.delete_config or "")
    if not added and not deleted:
        raise ToolError("At least one of --add-config, --add-config-file or --delete-config "
                        "must be specified with --alter")
    both = sorted(set(added) & set(deleted))
    if both:
        raise ToolError(f"Invalid entity config(s): {','.join(both)} are both added and "
                        "deleted")
    return added, deleted


def _alter(admin: Any, args: argparse.Namespace) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    added, deleted = _changes(args)
    for resource, label in _resources(admin, args):
        if deleted:
            # Kafka refuses to delete a name the entity does not override (its
            # dynamic configs): InvalidConfigurationException, the message alone.
            wanted = _dynamic_source(args.entity_type, label)
            overridden = {e.name for e in _describe_one(admin, resource, args).values()
                          if _source_value(e.source) == wanted}
            unknown = [k for k in deleted if k not in overridden]
            if unknown:
                raise ToolError(f"Invalid config(s): {','.join(unknown)}")
        if resource is BROKER_DEFAULT:
            _alter_default(args, added, deleted)
            print("Completed updating default config for brokers in the cluster.")
            continue
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in added.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in deleted]
        target = ConfigResource(resource.restype, resource.name, incremental_configs=entries)
        fut = admin.incremental_alter_configs([target], request_timeout=TIMEOUT_S)[target]
        try:
            wait_future(fut, TIMEOUT_S)
        except KafkaException as exc:
            raise _fail(error_text(exc)) from None
        if label:
            print(f"Completed updating config for {label}.")
        else:
            print("Completed updating default config for brokers in the cluster.")


def _quota_entity(types: list[str], names: list[str]) -> list[tuple[str, str | None]]:
    """(entity type, name or None for the default) pairs of the command line."""
    return [(QUOTA_ENTITY_TYPES[t], None if n == DEFAULT else n)
            for t, n in zip(types, names, strict=True)]


def _quota_text(entity: list[tuple[str, str | None]]) -> str:
    """Kafka's ConfigCommand words for an entity: user, then client id, then ip."""
    words = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
    names = dict(entity)
    return ", ".join(f"{words[t]} '{names[t]}'" if names[t] is not None else
                     f"the default {words[t]}" for t in ("user", "client-id", "ip")
                     if t in names)


def _describe_quotas(args: argparse.Namespace, types: list[str], names: list[str]) -> list:
    """DescribeClientQuotas with a strict filter (Kafka's containsOnly): a name
    matches exactly, --entity-default the default, no name every entity."""
    components = []
    for i, entity_type in enumerate(types):
        name = names[i] if i < len(names) else None
        match_type = 2 if name is None else 1 if name == DEFAULT else 0
        components.append({"entity_type": QUOTA_ENTITY_TYPES[entity_type],
                           "match_type": match_type,
                           "match": name if match_type == 0 else None})
    with _wire_client(args) as client:
        resp = client.request(ApiKey.DESCRIBE_CLIENT_QUOTAS,
                              {"components": components, "strict": True})
    if resp.error_code:
        raise _fail(resp.error_message or error_name(resp.error_code))
    return [([(e.entity_type, e.entity_name) for e in entry.entity],
             {v.key: v.value for v in entry.values}) for entry in resp.entries or []]


def _quotas(args: argparse.Namespace, types: list[str], names: list[str]) -> None:
    """--describe / --alter of users, clients (or both) and ips."""
    if args.describe:
        for entity, values in _describe_quotas(args, types, names):
            text = ", ".join(f"{k}={v}" for k, v in values.items())
            print(f"Quota configs for {_quota_text(entity)} are {text}")
        return
    if len(types) != len(names):
        raise ToolError("An entity name must be specified for every entity type")
    added, deleted = _changes(args)
    ops = []
    for key, value in added.items():
        try:
            ops.append({"key": key, "value": float(value), "remove": False})
        except ValueError:
            raise ToolError(f"Cannot parse quota configuration value for {key}: "
                            f"{value}") from None
    if deleted:
        current = _describe_quotas(args, types, names)
        existing = current[0][1] if current else {}
        unknown = [k for k in deleted if k not in existing]
        if unknown:
            raise ToolError(f"Invalid config(s): {','.join(unknown)}")
        ops += [{"key": k, "value": 0.0, "remove": True} for k in deleted]
    entity = [{"entity_type": t, "entity_name": n} for t, n in _quota_entity(types, names)]
    with _wire_client(args) as client:
        resp = client.request(ApiKey.ALTER_CLIENT_QUOTAS,
                              {"entries": [{"entity": entity, "ops": ops}],
                               "validate_only": False})
    (result,) = resp.entries
    if result.error_code:
        raise _fail(result.error_message or error_name(result.error_code))
    if names[0] != DEFAULT:
        print(f"Completed updating config for {types[0][:-1]} {names[0]}.")
    else:
        print(f"Completed updating default config for {types[0]} in the cluster.")


def entities(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The entity types and names of the command line, as ConfigCommand reads
    them: --entity-type may repeat (users and clients), each with its
    --entity-name or --entity-default in command-line order; or the shortcut
    flags (--topic, --client-defaults...), which may not be mixed with those."""
    types: list[str] = list(args.entity_type or [])
    names: list[str] = list(args.entity_names or [])
    named = [(t, getattr(args, dest)) for dest, t in ENTITY_FLAGS
             if getattr(args, dest) is not None]
    defaults = [(t, DEFAULT) for dest, t in DEFAULT_FLAGS if getattr(args, dest)]
    if named or defaults:
        if types or names:
            raise ToolError("--entity-{type,name,default} should not be used in conjunction "
                            "with specific entity flags")
        types = [t for t, _ in named + defaults]
        names = [n for _, n in named + defaults]
    duplicates = sorted({t for t in types if types.count(t) > 1})
    if duplicates:
        raise ToolError(f"Duplicate entity type(s) specified: {','.join(duplicates)}")
    if len(types) == 2 and types[0] == "clients":  # Kafka's order: user, then client id
        types.reverse()
        if len(names) == 2:
            names.reverse()
    return types, names


@run_tool
def run(args: argparse.Namespace) -> int:
    types, names = entities(args)
    if not types:
        raise ToolError("--entity-type must be specified")
    for entity_type in types:
        if entity_type not in ENTITY_TYPES:
            raise ToolError(f"--entity-type {entity_type} is not supported by pylog (only "
                            f"{', '.join(ENTITY_TYPES)})")
    if args.describe == args.alter:
        raise ToolError("Command must include exactly one action: --describe, --alter")
    if args.describe and (args.add_config or args.delete_config or args.add_config_file):
        raise ToolError("--add-config and --delete-config can only be used with --alter")
    if len(names) > len(types):
        raise ToolError("An entity type must be given for every entity name")
    if types[0] in QUOTA_ENTITY_TYPES:
        if len(types) > 1 and types != ["users", "clients"]:
            raise ToolError("Only '--entity-type users --entity-type clients' may be combined")
        _quotas(args, types, names)
        return 0
    if len(types) > 1:
        raise ToolError(f"--entity-type {types[0]} cannot be combined with another")
    args.entity_type = types[0]
    args.entity_name = names[0] if names and names[0] != DEFAULT else None
    args.entity_default = names == [DEFAULT]
    if args.entity_default and args.entity_type != "brokers":
        raise ToolError("--entity-default is only supported with --entity-type brokers, "
                        "users and clients")
    admin = admin_client(args)
    if args.entity_type == "broker-loggers":
        _broker_loggers(admin, args)
        return 0
    (_describe if args.describe else _alter)(admin, args)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "configs", help="describe or change topic and broker configs (kafka-configs)",
        description="Add/Remove entity config for a topic or broker.")
    add_bootstrap(p)
    p.add_argument("--entity-type", metavar="entity-type", action="append",
                   help="topics, brokers, broker-loggers, users, clients or ips "
                        "(users and clients together for a (user, client-id) quota)")
    p.add_argument("--entity-name", metavar="entity-name", action="append",
                   dest="entity_names",
                   help="name of the entity (topic name, broker id, user, client id)")
    p.add_argument("--entity-default", action="append_const", const=DEFAULT,
                   dest="entity_names",
                   help="the cluster-wide default for brokers, users or clients")
    p.add_argument("--topic", metavar="topic", help="shortcut for --entity-type topics "
                   "--entity-name <topic>")
    p.add_argument("--client", metavar="client-id", help="shortcut for --entity-type clients "
                   "--entity-name <client-id>")
    p.add_argument("--client-defaults", action="store_true",
                   help="shortcut for --entity-type clients --entity-default")
    p.add_argument("--user", metavar="user", help="shortcut for --entity-type users "
                   "--entity-name <user>")
    p.add_argument("--user-defaults", action="store_true",
                   help="shortcut for --entity-type users --entity-default")
    p.add_argument("--broker", metavar="broker-id", help="shortcut for --entity-type brokers "
                   "--entity-name <id>")
    p.add_argument("--broker-defaults", action="store_true",
                   help="shortcut for --entity-type brokers --entity-default")
    p.add_argument("--broker-logger", metavar="broker-id",
                   help="shortcut for --entity-type broker-loggers --entity-name <id>")
    p.add_argument("--ip", metavar="ip", help="shortcut for --entity-type ips --entity-name <ip>")
    p.add_argument("--ip-defaults", action="store_true",
                   help="shortcut for --entity-type ips --entity-default")
    p.add_argument("--describe", action="store_true", help="list configs for the given entity")
    p.add_argument("--alter", action="store_true", help="alter the configuration of the entity")
    p.add_argument("--all", action="store_true",
                   help="with --describe: all configs, not only the dynamic ones")
    p.add_argument("--add-config", metavar="k1=v1,k2=[v1,v2,v2],k3=v3",
                   help="key value pairs of configs to add")
    p.add_argument("--add-config-file", metavar="file", help="path to a properties file of "
                   "configs to add")
    p.add_argument("--delete-config", metavar="k1,k2", help="config keys to remove")
    p.add_argument("--force", action="store_true",
                   help="suppress console prompts (accepted as Kafka's tool accepts it; "
                        "there are none)")
    refuse_flags(p, {
        "--zookeeper": "pylog has no ZooKeeper; use --bootstrap-server",
        "--zk-tls-config-file": "pylog has no ZooKeeper; use --bootstrap-server",
    })
    p.set_defaults(func=run)
