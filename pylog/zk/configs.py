"""Dynamic configs in ZooKeeper: ``/config/<type>/<name>`` and the change
notices under ``/config/changes`` that tell every broker to re-read one
(Kafka's AdminZkClient.changeConfigs and ZkNodeChangeNotificationListener)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from pylog.zk.connection import Watch
from pylog.zk.ops import ZkOps
from pylog.zk.znodes import (
    ConfigChange,
    ConfigChangesZNode,
    ConfigEntityTypeZNode,
    ConfigEntityZNode,
    sequence_number,
)

# Kafka's ZkNodeChangeNotificationListener keeps notices 15 minutes.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


class ConfigOps(ZkOps):
    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        """The overrides of one entity ({} if none).  ``name`` is as stored:
        sanitized for users and clients (znodes.sanitize), ``<default>``..."""
        got = self.get_data(ConfigEntityZNode.path(entity_type, name))
        return ConfigEntityZNode.decode(entity_type, name, got[0]) if got else {}

    def get_entity_configs(self, entity_type: str, names: Iterable[str] | None = None
                           ) -> dict[str, dict[str, str]]:
        """Overrides of ``names`` (default: every entity of the type that has some)."""
        wanted = sorted(self.get_entities_with_config(entity_type) if names is None else names)
        got = self.get_data_many([ConfigEntityZNode.path(entity_type, n) for n in wanted])
        return {n: ConfigEntityZNode.decode(entity_type, n, g[0]) if g else {}
                for n, g in zip(wanted, got, strict=True)}

    def get_entities_with_config(self, entity_type: str) -> list[str]:
        return self.get_children(ConfigEntityTypeZNode.path(entity_type))

    def set_entity_config(self, entity_type: str, name: str, config: Mapping[str, str]) -> str:
        """Replace the entity's overrides, then post a change notice so that
        every broker re-reads them (Kafka's changeEntityConfig); the notice's name."""
        self.set_or_create(ConfigEntityZNode.path(entity_type, name),
                           ConfigEntityZNode.encode(config))
        return self.create_config_change_notification(f"{entity_type}/{name}")

    def create_config_change_notification(self, entity_path: str) -> str:
        """Post ``config_change_<seq>`` naming ``<type>/<name>``; its name."""
        self.create_recursive(ConfigChangesZNode.path(), exists_ok=True)
        path = self.create(ConfigChangesZNode.create_path(),
                           ConfigChangesZNode.encode(entity_path), sequence=True)
        return path.rsplit("/", 1)[1]

    def get_config_changes(self, after: int = -1) -> list[ConfigChange]:
        """Notices with a sequence number above ``after``, oldest first (one
        deleted meanwhile is skipped)."""
        names = [n for n in self.get_children(ConfigChangesZNode.path())
                 if sequence_number(n, ConfigChangesZNode.PREFIX) > after]
        names.sort(key=lambda n: sequence_number(n, ConfigChangesZNode.PREFIX))
        root = ConfigChangesZNode.path()
        out = []
        for name, got in zip(names, self.get_data_many([f"{root}/{n}" for n in names]),
                             strict=True):
            if got is not None:
                out.append(ConfigChange(name, sequence_number(name, ConfigChangesZNode.PREFIX),
                                        ConfigChangesZNode.decode(name, got[0]), got[1].ctime))
        return out

    def watch_config_changes(self, callback: Callable[[list[ConfigChange]], None],
                             after: int = -1) -> Watch:
        """``callback(new notices)`` for the notices above ``after`` now (if any)
        and for each batch that arrives later; each notice is delivered once."""
        last = [after]

        def on_children(_names: list[str]) -> None:
            changes = self.get_config_changes(last[0])
            if changes:
                last[0] = changes[-1].sequence
                callback(changes)

        return self.watch_children(ConfigChangesZNode.path(), on_children)

    def purge_config_changes(self, now_ms: int, expiration_ms: int = CHANGE_EXPIRATION_MS
                             ) -> int:
        """Delete notices older than ``expiration_ms`` (Kafka's
        purgeObsoleteNotifications); how many were deleted."""
        root = ConfigChangesZNode.path()
        names = self.get_children(root)
        deleted = 0
        for name, got in zip(names, self.get_data_many([f"{root}/{n}" for n in names]),
                             strict=True):
            if got is not None and now_ms - got[1].ctime > expiration_ms:
                deleted += self.delete(f"{root}/{name}")
        return deleted
