"""Sample message bodies built from the schema, for the protocol tests and benchmarks.

``sample_body(api_key, version, kind, seed)`` fills every field present in the
version with a non-default, seed-determined value: arrays get two elements,
nullable fields are null for some seeds, tagged fields are set.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from pylog.protocol import message_schema, struct_classes
from pylog.protocol.schema import Field

INT_RANGES = {
    "int8": (-128, 127), "int16": (-32768, 32767), "uint16": (0, 65535),
    "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1),
}


def _scalar(ftype: str, rng: random.Random) -> Any:
    if ftype in INT_RANGES:
        lo, hi = INT_RANGES[ftype]
        return rng.choice([rng.randint(lo, hi), rng.randint(1, min(hi, 120))])
    if ftype == "bool":
        return True
    if ftype == "float64":
        return rng.random() * 1e6
    if ftype == "string":
        return rng.choice(["topic-é", "x" * rng.randint(1, 140), "ß∂ƒ"])
    if ftype in ("bytes", "records"):
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300)))
    if ftype == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    raise AssertionError(ftype)


def sample_value(field: Field, version: int, classes: dict[str, type], rng: random.Random,
                 null_chance: float) -> Any:
    if field.nullable(version) and rng.random() < null_chance:
        return None
    if field.is_array:
        elem = field._replace(type=field.element_type, nullable_versions=None)
        return [sample_value(elem, version, classes, rng, null_chance) for _ in range(2)]
    if field.is_struct:
        return sample_struct(field.fields, field.element_type, version, classes, rng, null_chance)
    return _scalar(field.type, rng)


def sample_struct(fields: tuple[Field, ...], name: str, version: int, classes: dict[str, type],
                  rng: random.Random, null_chance: float) -> Any:
    values = {f.name: sample_value(f, version, classes, rng, null_chance)
              for f in fields if f.present(version)}
    return classes[name](**values)


def sample_body(api_key: int, version: int, kind: str, seed: int = 0,
                null_chance: float = 0.3) -> Any:
    schema = message_schema(api_key, kind)
    rng = random.Random(f"{api_key}-{version}-{kind}-{seed}")
    return sample_struct(schema.fields, schema.name, version, struct_classes(api_key, kind),
                         rng, null_chance)
