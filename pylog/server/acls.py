"""What DescribeAcls, CreateAcls and DeleteAcls share: no authorizer.

pylog has no authorizer (``authorizer.class.name`` is not a key it accepts),
so these answer as Kafka 3.6 does without one (``AclApis``): SECURITY_DISABLED,
with no ACL read or written.

Before that, as Kafka parses these requests (``DescribeAclsRequest`` and
``DeleteAclsRequest.normalizeAndValidate``, ``CreateAclsRequest.validate``), a
resource type, pattern type, operation or permission type of 0 (UNKNOWN)
throws IllegalArgumentException; a request that does not parse closes the
connection with no response (``SocketServer.processCompletedReceives``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from pylog.net.connection import CloseConnection
from pylog.protocol import ErrorCode

log = logging.getLogger(__name__)

SECURITY_DISABLED = ErrorCode.SECURITY_DISABLED
NO_AUTHORIZER = "No Authorizer is configured."  # CreateAcls, DeleteAcls
UNKNOWN = 0  # ResourceType, PatternType, AclOperation, AclPermissionType


def refuse_unknown(api: str, codes: Iterable[int]) -> None:
    """Close the connection, as Kafka does, when any of ``codes`` is UNKNOWN."""
    if UNKNOWN in codes:
        log.warning("closing connection: %s contains UNKNOWN elements", api)
        raise CloseConnection(f"{api} contains UNKNOWN elements")
