"""What each process of a one-host cluster gets, worked out and checked
before anything starts.

Every node runs the operator's ``--config`` and ``--override``s, then the
supervisor's own overrides: node i gets ``broker.id=i``, the first client
listener's port plus i (``advertised.listeners`` likewise, and the port of
``metrics.listener`` when it is set, so each node serves its own page),
``<log.dirs>/node-<i>`` and the ZooKeeper server's address.  Each node's whole config is loaded
here, so a bad one is refused before any process starts.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pylog.orphans import die_with_parent
from pylog.properties import PropertiesError, read_properties
from pylog.server.config import BrokerConfig, ConfigError, Endpoint, parse_listener
from pylog.zk.server import ZooKeeperServer, ZooKeeperServerError, check_installed

MAX_PORT = 65535
# ZooKeeper's data dir under the (first) log dir, next to the nodes' dirs.
ZOOKEEPER_DIR = "zookeeper"


class ClusterConfigError(ValueError):
    """A cluster that cannot be run as asked: refused before anything starts."""


@dataclass(frozen=True, slots=True)
class NodePlan:
    node_id: int
    port: int  # 0: a free port of the node's own, told by its ready line
    log_dirs: tuple[Path, ...]
    overrides: tuple[str, ...]  # the supervisor's, after the operator's

    def command(self, config_path: str | None, overrides: Sequence[str]) -> list[str]:
        """The node's command line: ``python -m pylog broker``, dying with the supervisor."""
        args = [*die_with_parent("TERM"), sys.executable, "-m", "pylog", "broker"]
        if config_path is not None:
            args += ["--config", config_path]
        for item in (*overrides, *self.overrides):
            args += ["--override", item]
        return args


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    config_path: str | None
    overrides: tuple[str, ...]  # the operator's
    nodes: tuple[NodePlan, ...]
    # The server the supervisor runs (not started yet); None: zookeeper.connect's.
    zookeeper: ZooKeeperServer | None
    zookeeper_connect: str

    def command(self, node: NodePlan) -> list[str]:
        return node.command(self.config_path, self.overrides)


def _format(ep: Endpoint) -> str:
    host = f"[{ep.host}]" if ":" in ep.host else ep.host
    return f"{ep.name}://{host}:{ep.port}"


def _shifted(endpoints: Sequence[Endpoint], name: str, by: int) -> str:
    """A listeners value with listener ``name``'s port moved up by ``by``."""
    return ",".join(_format(replace(ep, port=ep.port + by) if ep.name == name else ep)
                    for ep in endpoints)


def _metrics_url(url: str, by: int) -> str:
    """metrics.listener with its port moved up by ``by`` (port 0 stays: a free one)."""
    host, port, path = parse_listener(url)
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port + by if port else 0}{path}"


def _check_ports(key: str, first_port: int, nodes: int) -> None:
    last = first_port + nodes - 1
    if last > MAX_PORT:
        raise ClusterConfigError(f"--nodes {nodes}: node {nodes - 1} would listen on port "
                                 f"{last} ({key} puts node 0 on port {first_port}), "
                                 f"past {MAX_PORT}")


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _zookeeper_server(data_dir: Path, zookeeper_config: str | None) -> ZooKeeperServer:
    """The server to run: on 127.0.0.1 and a free port, data in ``data_dir``,
    unless the file (Kafka's zookeeper.properties keys) says otherwise."""
    props = {"dataDir": str(data_dir), "clientPortAddress": "127.0.0.1"}
    if zookeeper_config is not None:
        try:
            props.update(read_properties(Path(zookeeper_config).read_text(), zookeeper_config))
        except OSError as exc:
            raise ClusterConfigError(f"--zookeeper-config: cannot read {zookeeper_config}: "
                                     f"{exc.strerror}") from None
        except PropertiesError as exc:
            raise ClusterConfigError(str(exc)) from None
    if "clientPort" not in props:
        props["clientPort"] = str(_free_port(props["clientPortAddress"] or "127.0.0.1"))
    try:
        server = ZooKeeperServer(props, log="file", die_with_parent=True)
    except ZooKeeperServerError as exc:
        raise ClusterConfigError(f"ZooKeeper: {exc}") from None
    check_installed()  # ZooKeeperServerError: how to install it
    return server


def plan_cluster(config_path: str | None, overrides: Sequence[str], nodes: int,
                 zookeeper_config: str | None = None) -> ClusterPlan:
    """The cluster's plan; ClusterConfigError (or ZooKeeperServerError when
    ZooKeeper is not installed) when it cannot run."""
    if nodes < 1:
        raise ClusterConfigError(f"--nodes must be 1 or more, not {nodes}")
    if nodes > MAX_PORT:
        raise ClusterConfigError(f"--nodes {nodes}: each node needs a port of its own "
                                 f"(at most {MAX_PORT} nodes)")
    overrides = tuple(overrides)
    try:
        config = BrokerConfig.load(config_path, overrides)
    except ConfigError as exc:
        raise ClusterConfigError(str(exc)) from None
    if config["process.roles"]:
        raise ClusterConfigError("process.roles is set (KRaft): a cluster of --nodes keeps "
                                 "its metadata in ZooKeeper; leave process.roles unset")
    external = config["zookeeper.connect"]
    if external is not None and zookeeper_config is not None:
        raise ClusterConfigError(f"--zookeeper-config: zookeeper.connect={external} names the "
                                 "ZooKeeper to use, so none is started")
    if nodes == 1 and zookeeper_config is not None:
        raise ClusterConfigError("--zookeeper-config is for a cluster (--nodes 2 or more); "
                                 "one node needs no ZooKeeper")

    listener = config.listeners[0]
    if listener.port:
        _check_ports("listeners", listener.port, nodes)
    advertised = config["advertised.listeners"] or ()
    shifted_adv = [ep for ep in advertised if ep.name == listener.name]
    for ep in shifted_adv:
        if ep.port == 0:
            raise ClusterConfigError(f"advertised.listeners: {_format(ep)} cannot be "
                                     "advertised (port 0)")
        _check_ports("advertised.listeners", ep.port, nodes)
    metrics = config["metrics.listener"]
    metrics_port = parse_listener(metrics)[1] if metrics else 0
    if metrics_port:
        _check_ports("metrics.listener", metrics_port, nodes)
        if listener.port and (metrics_port < listener.port + nodes
                              and listener.port < metrics_port + nodes):
            raise ClusterConfigError(
                f"--nodes {nodes}: metrics.listener's ports {metrics_port}-"
                f"{metrics_port + nodes - 1} overlap the listeners' ports {listener.port}-"
                f"{listener.port + nodes - 1} (each node takes the first port + its id)")
    log_dirs = [Path(d).expanduser() for d in config["log.dirs"]]

    zookeeper = None
    connect = external
    if external is None:
        zookeeper = _zookeeper_server(log_dirs[0].resolve() / ZOOKEEPER_DIR, zookeeper_config)
        connect = zookeeper.address

    plans = []
    for i in range(nodes):
        dirs = tuple(d / f"node-{i}" for d in log_dirs)
        own = [f"broker.id={i}"]
        if "node.id" in config.originals:  # both set: they must agree
            own.append(f"node.id={i}")
        if listener.port:
            own.append(f"listeners={_shifted(config['listeners'], listener.name, i)}")
        if shifted_adv:
            own.append(f"advertised.listeners={_shifted(advertised, listener.name, i)}")
        if metrics_port:
            own.append(f"metrics.listener={_metrics_url(metrics, i)}")
        own.append("log.dirs=" + ",".join(str(d) for d in dirs))
        if zookeeper is not None:
            own.append(f"zookeeper.connect={connect}")
        try:
            BrokerConfig.load(config_path, (*overrides, *own))
        except ConfigError as exc:
            raise ClusterConfigError(f"node {i}: {exc}") from None
        plans.append(NodePlan(i, listener.port + i if listener.port else 0, dirs, tuple(own)))
    return ClusterPlan(config_path, overrides, tuple(plans), zookeeper, connect)
