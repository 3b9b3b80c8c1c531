"""``pylog storage``: Kafka's ``kafka-storage.sh`` (StorageTool) for pylog.

The Kafka 3.6 quickstart formats a KRaft node's log directories before its
first start, and pylog runs the same steps with the same config file::

    KAFKA_CLUSTER_ID="$(pylog storage random-uuid)"
    pylog storage format -t $KAFKA_CLUSTER_ID -c config/kraft/server.properties
    pylog broker --config config/kraft/server.properties

* ``random-uuid`` prints a new cluster id (a Kafka Uuid);
* ``format`` writes ``meta.properties`` (version 1, the config's
  ``node.id``, the cluster id) into the config's log dir; a dir already
  formatted is an error unless ``--ignore-formatted``;
* ``info`` shows what the log dir holds, and the problems Kafka's tool reports.

pylog keeps the cluster's metadata (topics, configs) in the node's log dir,
so there is no ``__cluster_metadata`` log to bootstrap: ``--release-version``
is checked and printed, and SCRAM credentials (``--add-scram``) are refused
(pylog has no SASL).  ``pylog broker`` still formats an empty dir itself on
its first start (the embedded default).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pylog.log import meta_properties
from pylog.log.dir_lock import LogDirLock, LogDirLockedError
from pylog.tools.common import ToolError, run_tool

# The newest metadata.version of each 3.x release, as Kafka's MetadataVersion
# names them; pylog answers as Kafka 3.6 does.
_RELEASES = {"3.0": 1, "3.1": 0, "3.2": 0, "3.3": 3, "3.4": 0, "3.5": 2, "3.6": 2}
DEFAULT_RELEASE = "3.6-IV2"
_RELEASE = re.compile(r"(3\.\d)(?:-IV(\d+))?")


def release_version(text: str) -> str:
    """Kafka's MetadataVersion.fromVersionString, for the 3.x releases."""
    found = _RELEASE.fullmatch(text.strip())
    if found is None or found[1] not in _RELEASES or (
            found[2] is not None and int(found[2]) > _RELEASES[found[1]]):
        raise ToolError(f"Unknown metadata.version '{text}'. Supported metadata.version "
                        f"values are 3.0-IV1 to {DEFAULT_RELEASE}")
    return f"{found[1]}-IV{found[2] if found[2] is not None else _RELEASES[found[1]]}"


def _config(path: str):  # -> BrokerConfig
    from pylog.server.config import BrokerConfig, ConfigError

    try:
        return BrokerConfig.load(path)
    except ConfigError as exc:
        raise ToolError(str(exc)) from None


def _format(args: argparse.Namespace) -> int:
    config = _config(args.config)
    if not config["process.roles"]:
        raise ToolError("The kafka configuration file appears to be for a legacy cluster. "
                        "Formatting is only supported for clusters in KRaft mode.")
    if args.add_scram:
        raise ToolError("--add-scram: pylog has no SASL, so no SCRAM credentials to store")
    try:
        cluster_id = meta_properties.check_cluster_id(args.cluster_id)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    version = release_version(args.release_version or DEFAULT_RELEASE)
    directories = [config.log_dir]
    todo = []
    for directory in directories:
        if (directory / meta_properties.META_PROPERTIES).exists():
            if not args.ignore_formatted:
                raise ToolError(f"Log directory {directory} is already formatted. Use "
                                "--ignore-formatted to ignore this directory and format "
                                "the others.")
        else:
            todo.append(directory)
    if not todo:
        print("All of the log directories are already formatted.")
    for directory in todo:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            # As the broker: nothing writes a dir another process is using.
            with LogDirLock(directory):
                meta_properties.write(directory, config.node_id, cluster_id)
        except LogDirLockedError as exc:
            raise ToolError(str(exc)) from None
        except OSError as exc:
            raise ToolError(f"Unable to create storage directory {directory}: "
                            f"{exc.strerror}") from None
        print(f"Formatting {directory} with metadata.version {version}.")
    return 0


def _info(args: argparse.Namespace) -> int:
    config = _config(args.config)
    problems: list[str] = []
    found: list[Path] = []
    meta: dict[str, str] | None = None
    for directory in [config.log_dir]:
        if not directory.is_dir():
            problems.append(f"{directory} "
                            f"{'is not a directory' if directory.exists() else 'does not exist'}")
            continue
        found.append(directory)
        meta = meta_properties.read(directory)
        if meta is None:
            problems.append(f"{directory} is not formatted.")
    if meta is not None:
        kraft = bool(config["process.roles"])
        if kraft and meta.get("version") == "0":
            problems.append("The kafka configuration file appears to be for a cluster in "
                            "KRaft mode, but the directories are formatted for legacy mode.")
        elif not kraft and meta.get("version") == "1":
            problems.append("The kafka configuration file appears to be for a legacy "
                            "cluster, but the directories are formatted for a cluster in "
                            "KRaft mode.")
    if found:
        print("Found log directory:" if len(found) == 1 else "Found log directories:")
        for directory in found:
            print(f"  {directory}")
        print()
    if meta is not None:
        # Java's TreeMap.toString of the properties, sorted by key.
        print("Found metadata: {" + ", ".join(f"{k}={v}" for k, v in sorted(meta.items()))
              + "}")
        print()
    if problems:
        print("Found problem:" if len(problems) == 1 else "Found problems:")
        for problem in problems:
            print(f"  {problem}")
        print()
        return 1
    return 0


def _random_uuid(args: argparse.Namespace) -> int:
    print(meta_properties.random_cluster_id())
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("storage", help="format and inspect log directories (kafka-storage)",
                       description="The Kafka storage tool.")
    commands = p.add_subparsers(dest="storage_command", metavar="{info,format,random-uuid}",
                                required=True)
    info = commands.add_parser("info", help="Get information about the Kafka log directories "
                               "on this node.")
    fmt = commands.add_parser("format", help="Format the Kafka log directories on this node.")
    for q in (info, fmt):
        q.add_argument("--config", "-c", required=True, help="The Kafka configuration file "
                       "to use.")
    fmt.add_argument("--cluster-id", "-t", required=True, help="The cluster ID to use.")
    fmt.add_argument("--add-scram", "-S", action="append",
                     help="A SCRAM_CREDENTIAL to add (refused: pylog has no SASL)")
    fmt.add_argument("--ignore-formatted", "-g", action="store_true")
    fmt.add_argument("--release-version", "-r",
                     help=f"The release version to use for the initial metadata.version "
                          f"(3.0-IV1 to {DEFAULT_RELEASE}; the default is {DEFAULT_RELEASE})")
    quorum = fmt.add_mutually_exclusive_group()
    quorum.add_argument("--standalone", "-s", action="store_true",
                        help="Used to initialize a single-node quorum controller quorum "
                             "(accepted: a pylog node keeps the metadata itself)")
    quorum.add_argument("--initial-controllers", "-I", help="controller quorum voters "
                        "(accepted, unused: a pylog node keeps the metadata itself)")
    rnd = commands.add_parser("random-uuid", help="Print a random UUID.")
    info.set_defaults(func=run_tool(_info))
    fmt.set_defaults(func=run_tool(_format))
    rnd.set_defaults(func=run_tool(_random_uuid))
