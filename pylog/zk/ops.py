"""Generic znode operations under KafkaZkClient's Kafka-level ones.

Writes can be fenced by the controller epoch, as Kafka's controller fences
its own: given ``controller_epoch_zk_version`` (the data version of
``/controller_epoch`` when this controller was elected), the write goes in a
ZooKeeper transaction behind a version check of ``/controller_epoch``, and a
controller that has been replaced gets :class:`ControllerMovedError` instead of
overwriting its successor's state (Kafka's expectedControllerEpochZkVersion).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import kazoo.exceptions as kz
from kazoo.protocol.states import ZnodeStat

from pylog.zk.connection import Watch, ZkConnection, translate
from pylog.zk.errors import (
    BadVersionError,
    BadZnodeError,
    ControllerMovedError,
    NodeExistsError,
    NoNodeError,
    ZkError,
)
from pylog.zk.znodes import MATCH_ANY_VERSION, UNKNOWN_VERSION, ControllerEpochZNode

log = logging.getLogger("pylog.zk")


class Cas(NamedTuple):
    """A compare-and-set's outcome: the new data version, or UNKNOWN_VERSION
    (-2) when the znode had another version (or was gone)."""

    succeeded: bool
    version: int


class Op(NamedTuple):
    """One write: ``kind`` is "create", "set" or "delete"."""

    kind: str
    path: str
    data: bytes | None = None
    version: int = MATCH_ANY_VERSION
    ephemeral: bool = False
    sequence: bool = False


def parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


class ZkOps:
    """Reads, fenced writes and typed watches over one ZkConnection."""

    def __init__(self, conn: ZkConnection) -> None:
        self.conn = conn

    # -- reads --------------------------------------------------------------------------

    def get_data(self, path: str) -> tuple[bytes | None, ZnodeStat] | None:
        """(data, stat), or None when the znode is missing."""
        try:
            return self.conn.call("get", path, lambda zk: zk.get_async(path))
        except NoNodeError:
            return None

    def get_data_many(self, paths: Sequence[str]) -> list[tuple[bytes | None, ZnodeStat] | None]:
        """get_data of several znodes, pipelined."""
        results = self.conn.call_many("get", [(p, lambda zk, p=p: zk.get_async(p))
                                              for p in paths])
        out: list[tuple[bytes | None, ZnodeStat] | None] = []
        for r in results:
            if isinstance(r, NoNodeError):
                out.append(None)
            elif isinstance(r, ZkError):
                raise r
            else:
                out.append(r)
        return out

    def get_children(self, path: str) -> list[str]:
        """The children's names, sorted ([] when the znode is missing, as in Kafka)."""
        try:
            return sorted(self.conn.call("get children of", path,
                                         lambda zk: zk.get_children_async(path)))
        except NoNodeError:
            return []

    def exists(self, path: str) -> ZnodeStat | None:
        return self.conn.call("exists", path, lambda zk: zk.exists_async(path))

    def path_exists(self, path: str) -> bool:
        return self.exists(path) is not None

    # -- writes -------------------------------------------------------------------------

    def write(self, what: str, ops: Sequence[Op],
              controller_epoch_zk_version: int | None = None) -> list[Any]:
        """Run ``ops`` -- one alone, or all-or-nothing in a transaction (always
        when fenced).  Results: the created path, the new stat, or True for a
        delete; the first failure is raised (NodeExistsError, NoNodeError,
        BadVersionError...)."""
        fence = _fence(controller_epoch_zk_version)
        if fence is None and len(ops) == 1:
            op = ops[0]
            return [self.conn.call(what, op.path, lambda zk: _issue(zk, op))]
        results = self.conn.call(what, ops[0].path if ops else "/", _committer(ops, fence))
        return _outcomes(what, ops, fence, results)

    def conditional_update_many(self, updates: Sequence[tuple[str, bytes, int]],
                                controller_epoch_zk_version: int | None = None) -> list[Cas]:
        """conditional_update of several znodes (path, data, expected version),
        pipelined as Kafka's controller sends its partition state updates:
        each on its own, so a conflict fails that one only."""
        fence = _fence(controller_epoch_zk_version)
        batches = [[Op("set", path, data, version)] for path, data, version in updates]
        raw = self.conn.call_many("set", [
            (ops[0].path, (lambda zk, op=ops[0]: _issue(zk, op)) if fence is None
             else _committer(ops, fence)) for ops in batches])
        out = []
        for ops, result in zip(batches, raw, strict=True):
            try:
                if isinstance(result, ZkError):
                    raise result
                found = _outcomes("set", ops, fence, result) if fence is not None else [result]
            except (BadVersionError, NoNodeError):
                out.append(Cas(False, UNKNOWN_VERSION))
                continue
            out.append(Cas(True, found[0].version))
        return out

    def create(self, path: str, data: bytes | None = None, *, ephemeral: bool = False,
               sequence: bool = False, controller_epoch_zk_version: int | None = None) -> str:
        """Create one znode (its parent must exist); the created path."""
        return self.write("create", [Op("create", path, data, ephemeral=ephemeral,
                                        sequence=sequence)], controller_epoch_zk_version)[0]

    def create_recursive(self, path: str, data: bytes | None = None, *,
                         exists_ok: bool = False,
                         controller_epoch_zk_version: int | None = None) -> None:
        """Create ``path`` and any missing parents (with no data, as Kafka's
        createRecursive does); NodeExistsError unless ``exists_ok``."""
        fence = controller_epoch_zk_version
        try:
            self.create(path, data, controller_epoch_zk_version=fence)
            return
        except NodeExistsError:
            if exists_ok:
                return
            raise
        except NoNodeError:
            pass
        self.create_recursive(parent(path), exists_ok=True, controller_epoch_zk_version=fence)
        try:
            self.create(path, data, controller_epoch_zk_version=fence)
        except NodeExistsError:
            if not exists_ok:
                raise

    def conditional_update(self, path: str, data: bytes, expected_version: int,
                           controller_epoch_zk_version: int | None = None) -> Cas:
        """Set ``path``'s data if its version is ``expected_version`` (-1: any)."""
        try:
            [stat] = self.write("set", [Op("set", path, data, expected_version)],
                                controller_epoch_zk_version)
        except (BadVersionError, NoNodeError):
            return Cas(False, UNKNOWN_VERSION)
        return Cas(True, stat.version)

    def set_or_create(self, path: str, data: bytes,
                      controller_epoch_zk_version: int | None = None) -> None:
        """Kafka's set-then-create-if-missing."""
        fence = controller_epoch_zk_version
        try:
            self.write("set", [Op("set", path, data)], fence)
        except NoNodeError:
            try:
                self.create_recursive(path, data, controller_epoch_zk_version=fence)
            except NodeExistsError:  # created meanwhile
                self.write("set", [Op("set", path, data)], fence)

    def delete(self, path: str, controller_epoch_zk_version: int | None = None) -> bool:
        """Delete one znode (any version); False if it was not there."""
        try:
            self.write("delete", [Op("delete", path)], controller_epoch_zk_version)
            return True
        except NoNodeError:
            return False

    def delete_recursive(self, path: str,
                         controller_epoch_zk_version: int | None = None) -> bool:
        """Delete ``path`` and everything below it; False if it was not there."""
        children = self.get_children(path)
        if not children and not self.path_exists(path):
            return False
        for child in children:
            self.delete_recursive(f"{path.rstrip('/')}/{child}", controller_epoch_zk_version)
        self.delete(path, controller_epoch_zk_version)
        return True

    # -- watches ------------------------------------------------------------------------

    def watch_data(self, path: str, decode: Callable[[bytes | None, ZnodeStat], Any],
                   callback: Callable[[Any], None]) -> Watch:
        """``callback(decode(data, stat))`` now and after each change of
        ``path``; ``callback(None)`` while it is missing.  Data that does not
        decode is logged and skipped: the watch stays armed."""
        def on_change(data: Any, stat: ZnodeStat | None) -> None:
            if stat is None:
                callback(None)
                return
            try:
                value = decode(data, stat)
            except BadZnodeError as exc:
                log.error("ignoring a change of %s: %s", path, exc)
                return
            callback(value)

        return self.conn.watch(path, False, on_change)

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Watch:
        """``callback(sorted child names)`` now and after each change ([] while
        ``path`` is missing)."""
        return self.conn.watch(path, True, lambda names, _stat: callback(sorted(names or [])))


def _fence(controller_epoch_zk_version: int | None) -> int | None:
    if controller_epoch_zk_version is not None and controller_epoch_zk_version < 0:
        raise ValueError(f"controller epoch zkVersion {controller_epoch_zk_version} should "
                         "be non-negative")
    return controller_epoch_zk_version


def _committer(ops: Sequence[Op], fence: int | None) -> Callable[[Any], Any]:
    """What sends ``ops`` as one transaction, behind the controller epoch check."""
    def commit(zk: Any) -> Any:
        t = zk.transaction()
        if fence is not None:
            t.check(ControllerEpochZNode.path(), fence)
        for op in ops:
            if op.kind == "create":
                t.create(op.path, op.data or b"", ephemeral=op.ephemeral, sequence=op.sequence)
                if op.data is None:
                    # kazoo's transactions take only bytes; the wire takes null,
                    # which Kafka writes (zookeeper-shell's get shows "null").
                    t.operations[-1] = t.operations[-1]._replace(data=None)
            elif op.kind == "set":
                t.set_data(op.path, op.data, op.version)
            else:
                t.delete(op.path, op.version)
        return t.commit_async()

    return commit


def _outcomes(what: str, ops: Sequence[Op], fence: int | None, results: list[Any]
              ) -> list[Any]:
    """A transaction's results, its first failure raised (a failed fence as
    ControllerMovedError)."""
    if fence is not None:
        check, results = results[0], results[1:]
        if isinstance(check, (kz.BadVersionError, kz.NoNodeError)):
            raise ControllerMovedError(f"Controller epoch zkVersion check fails. Expected "
                                       f"zkVersion = {fence}")
    for op, result in zip(ops, results, strict=True):
        if isinstance(result, Exception) and not isinstance(
                result, (kz.RolledBackError, kz.RuntimeInconsistency)):
            raise translate(result, what, op.path)
    return results


def _issue(zk: Any, op: Op) -> Any:
    if op.kind == "create":
        return zk.create_async(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequence)
    if op.kind == "set":
        return zk.set_async(op.path, op.data, op.version)
    return zk.delete_async(op.path, op.version)
