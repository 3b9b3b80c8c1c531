"""One Python class per message struct, built from the schema.

Every struct of a message (the message itself, each "[]Foo" element, each
nested "Foo") becomes a class with ``__slots__`` holding the union of its fields
over all versions, so one class serves every version: fields absent from the
version that was decoded hold their schema default. Classes give fast attribute
access, ``to_dict()``, equality and a readable ``repr``.

Each instance also has ``_unknown_tagged_fields``: None, or ``{tag: bytes}`` for
tagged fields this schema does not know; decoders keep them and encoders write
them back, so a message passes through unchanged.
"""

from __future__ import annotations

from typing import Any

from pylog.errors import ProtocolError
from pylog.protocol.schema import Field, MessageSchema
from pylog.protocol.types import ZERO_UUID

UNKNOWN_TAGS = "_unknown_tagged_fields"


class Struct:
    """Base of generated struct classes."""

    __slots__ = ()
    _fields: tuple[Field, ...] = ()
    _field_names: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Field values by name; nested structs as dicts, lists as lists."""
        return {name: _plain(getattr(self, name)) for name in self._field_names}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Struct:
        """An instance from a dict (nested dicts stay dicts; encoders accept them)."""
        try:
            return cls(**values)
        except TypeError as exc:
            raise ProtocolError(f"{cls.__qualname__}: {exc}") from None

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._field_names)
        return f"{type(self).__qualname__}({inner})"


def _plain(value: Any) -> Any:
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def coerce(cls: type, value: Any) -> Any:
    """``value`` as an instance of struct class ``cls``: instances pass through,
    dicts are converted, other objects (another library's messages) are read
    attribute by attribute."""
    if isinstance(value, cls):
        return value
    if isinstance(value, dict):
        return cls.from_dict(value)
    if value is None:
        raise ProtocolError(f"{cls.__qualname__}: null where a struct is required")
    return cls(**{n: getattr(value, n) for n in cls._field_names if hasattr(value, n)})


def default_source(field: Field, classes: dict[str, type]) -> str:
    """Python expression for a fresh default value of ``field``."""
    d = field.default
    if field.is_array or field.is_struct:
        if d is None:
            return "None"
        if field.is_array:
            return "[]"
        return f"_classes[{field.element_type!r}]()"
    if field.type == "uuid":
        return "_ZERO_UUID"
    return repr(d)


def build_classes(schema: MessageSchema) -> dict[str, type]:
    """Classes for every struct of a message, by struct name; the message itself
    is under its own name (``"ProduceRequest"``)."""
    classes: dict[str, type] = {}
    _build(schema.name, schema.name, schema.fields, classes)
    root = classes[schema.name]
    for name, cls in classes.items():
        if cls is not root:
            setattr(root, name, cls)
    return classes


def _build(name: str, qualprefix: str, fields: tuple[Field, ...], classes: dict[str, type]) -> None:
    if name in classes:
        if classes[name]._fields != fields:
            raise ValueError(f"struct {name} defined twice with different fields")
        return
    for f in fields:
        if f.fields is not None:
            _build(f.element_type, qualprefix, f.fields, classes)
    names = tuple(f.name for f in fields)
    params = ", ".join(f"{n}=_MISSING" for n in names + (UNKNOWN_TAGS,))
    body = [f"def __init__(self, {params}):"]
    for f in fields:
        body.append(f"    self.{f.name} = {default_source(f, classes)} "
                    f"if {f.name} is _MISSING else {f.name}")
    body.append(f"    self.{UNKNOWN_TAGS} = None if {UNKNOWN_TAGS} is _MISSING else {UNKNOWN_TAGS}")
    namespace: dict[str, Any] = {"_MISSING": _MISSING, "_ZERO_UUID": ZERO_UUID, "_classes": classes}
    exec("\n".join(body), namespace)  # noqa: S102 - source built from the schema above
    qualname = name if name == qualprefix else f"{qualprefix}.{name}"
    cls = type(name, (Struct,), {
        "__slots__": names + (UNKNOWN_TAGS,),
        "__init__": namespace["__init__"],
        "__qualname__": qualname,
        "__module__": "pylog.protocol.structs",
        "_fields": fields,
        "_field_names": names,
    })
    classes[name] = cls


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()
