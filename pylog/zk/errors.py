"""What the ZooKeeper layer raises: one family, ZkError, under PylogError."""

from __future__ import annotations

from pylog.errors import PylogError


class ZkError(PylogError):
    """A ZooKeeper operation that failed."""


class ZkConnectError(ZkError):
    """The first connection was not made within zookeeper.connection.timeout.ms."""


class ZkUnavailableError(ZkError):
    """Not connected (or no answer) within the connection timeout: the call
    was not done, or (when it says so) its outcome is unknown."""


class NodeExistsError(ZkError):
    """A znode to create is already there."""

    def __init__(self, path: str, message: str | None = None) -> None:
        super().__init__(message or f"Node already exists: {path}")
        self.path = path


class NoNodeError(ZkError):
    """A znode to read, change or delete is not there."""

    def __init__(self, path: str, message: str | None = None) -> None:
        super().__init__(message or f"Node does not exist: {path}")
        self.path = path


class BadVersionError(ZkError):
    """A conditional write found another data version."""


class NotEmptyError(ZkError):
    """A znode to delete has children."""


class TopicExistsError(ZkError):
    """Kafka's TopicExistsException: the topic exists or is being deleted."""


class ControllerMovedError(ZkError):
    """Kafka's ControllerMovedException: a fenced write found another
    controller epoch, or the controller election was lost."""


class BadZnodeError(ZkError, ValueError):
    """A znode whose data is not what Kafka writes there."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"Malformed data in znode {path}: {reason}")
        self.path = path
        self.reason = reason
