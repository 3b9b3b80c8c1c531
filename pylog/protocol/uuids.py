"""Kafka's ``Uuid`` as text: its 16 bytes in URL-safe base64 without padding
(topic ids in ``/brokers/topics/<t>`` and ``partition.metadata``, cluster ids)."""

from __future__ import annotations

import base64
import uuid


def uuid_text(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def parse_uuid(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``; ValueError for text that is not 16 bytes of base64."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"Input string `{text}` decoded as {len(raw)} bytes, which is not "
                         "equal to the expected 16 bytes of a base64-encoded UUID")
    return uuid.UUID(bytes=raw)
