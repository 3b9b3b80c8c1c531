"""The generated schema tables (``schema_gen``) as small objects with version tests.

``schema_gen`` stores plain tuples so that it stays a compact, diffable file; this
module gives them names (``Field.versions``, ``MessageSchema.is_flexible(v)``) for
the struct-class builder and the codec compiler.
"""

from __future__ import annotations

import re
from enum import IntEnum
from typing import Any, NamedTuple

from pylog.protocol.schema_gen import API_NAMES, HEADERS, MESSAGES

Versions = tuple[int, int | None] | None

FIXED_SIZES = {
    "bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
    "int64": 8, "float64": 8, "uuid": 16,
}
PRIMITIVES = set(FIXED_SIZES) | {"string", "bytes", "records"}


def in_versions(versions: Versions, version: int) -> bool:
    if versions is None:
        return False
    lo, hi = versions
    return lo <= version and (hi is None or version <= hi)


class Field(NamedTuple):
    name: str  # python attribute name
    kafka_name: str
    type: str  # "int32", "[]string", "[]TopicData", "SnapshotId", ...
    versions: Versions
    nullable_versions: Versions
    tag: int | None
    tagged_versions: Versions
    default: Any
    fields: tuple[Field, ...] | None  # sub-fields when the type is a struct or struct array

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        """The type of one element (the type itself for non-arrays)."""
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        """A struct or an array of structs."""
        return self.fields is not None

    def present(self, version: int) -> bool:
        return in_versions(self.versions, version)

    def nullable(self, version: int) -> bool:
        return in_versions(self.nullable_versions, version)

    def tagged(self, version: int) -> bool:
        return self.tag is not None and in_versions(self.tagged_versions, version)


def _fields(raw: tuple) -> tuple[Field, ...]:
    return tuple(Field(*f[:8], _fields(f[8]) if f[8] is not None else None) for f in raw)


class MessageSchema(NamedTuple):
    api_key: int
    kind: str  # "request" or "response"
    name: str  # "ProduceRequest"
    valid_versions: tuple[int, int]
    flexible_versions: Versions
    fields: tuple[Field, ...]
    latest_version_unstable: bool

    @property
    def min_version(self) -> int:
        return self.valid_versions[0]

    @property
    def max_version(self) -> int:
        return self.valid_versions[1]

    def supports(self, version: int) -> bool:
        return self.valid_versions[0] <= version <= self.valid_versions[1]

    def is_flexible(self, version: int) -> bool:
        """Flexible encoding (compact lengths, tagged fields); also answers for
        versions past the valid range, as Kafka does when it parses the header of
        a request it will reject."""
        return in_versions(self.flexible_versions, version)


MESSAGE_SCHEMAS: dict[tuple[int, str], MessageSchema] = {
    key: MessageSchema(key[0], key[1], name, valid, flexible, _fields(fields), unstable)
    for key, (name, valid, flexible, fields, unstable) in MESSAGES.items()
}
HEADER_FIELDS: dict[str, tuple[Field, ...]] = {
    name: _fields(fields) for name, (_valid, _flexible, fields) in HEADERS.items()
}


def _constant_name(api_name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", api_name).upper()


ApiKey = IntEnum("ApiKey", [(_constant_name(name), key) for key, name in sorted(API_NAMES.items())])
ApiKey.__doc__ = "Kafka API keys by name (``ApiKey.PRODUCE == 0``), from the schemas."
