"""Compile a message schema into a decoder and an encoder for one version.

Interpreting the schema field by field at run time costs a dispatch per field;
instead, for each (api, version, request/response) this module writes the Python
source of a straight-line decoder and encoder (loops only for arrays) and
``exec``s it once. Consecutive fixed-size fields are read and written with one
``struct.Struct`` call; one-byte varints are inlined.

Decoder: ``decode(buf, pos, n) -> (obj, pos)`` over a 1-D unsigned-byte
memoryview ``buf`` of length ``n``. It checks every length against the bytes left
before slicing, and every array count against the bytes left (each element takes
at least one byte) before allocating, so bad input cannot make it read out of
bounds or allocate without bound. Bounds of fixed-size reads are checked by
``struct`` itself; callers turn ``struct.error``/``IndexError``/``UnicodeDecodeError``
into ``ProtocolError``.

Encoder: ``encode(obj, ap)`` appends bytes-like pieces with ``ap`` (a list's
``append``). ``obj`` and nested values may be struct instances, dicts or other
objects with the fields as attributes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from pylog.protocol import types as t
from pylog.protocol.schema import FIXED_SIZES, Field, MessageSchema
from pylog.protocol.structs import UNKNOWN_TAGS, coerce

Decoder = Callable[[memoryview, int, int], tuple[Any, int]]
Encoder = Callable[[Any, Callable[[Any], None]], None]

_RUNTIME = {
    "_fail": t.fail,
    "_uvt": t.uvarint_tail,
    "_ruv": t.read_uvarint,
    "_uv": t.uvarint,
    "_UV1": t.UVARINT_1,
    "_uuid": t.uuid_from_bytes,
    "_uuid_b": t.uuid_to_bytes,
    "_piece": t.as_bytes_piece,
    "_wt": t.write_tagged,
    "_coerce": coerce,
    "_new": object.__new__,
    "_unpack_from": struct.unpack_from,
    "_pack": struct.pack,
    "_I8u": t.INT8.unpack_from,
    "_I16u": t.INT16.unpack_from,
    "_I32u": t.INT32.unpack_from,
    "_I16p": t.INT16.pack,
    "_I32p": t.INT32.pack,
    "_ZERO_UUID": t.ZERO_UUID,
    "_Z16": bytes(16),
}


class _Source:
    """Lines of generated source, unique local names and the constants they use."""

    def __init__(self, classes: dict[str, type]) -> None:
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = dict(_RUNTIME)
        self.classes = classes
        self._count = 0

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def var(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def const(self, value: Any, prefix: str = "_K") -> str:
        for name, existing in self.namespace.items():
            if existing is value and name.startswith(prefix):
                return name
        name = self.var(prefix)
        self.namespace[name] = value
        return name

    def cls(self, struct_name: str) -> str:
        return self.const(self.classes[struct_name], "_C")

    def build(self, name: str) -> Callable:
        exec(compile("\n".join(self.lines), f"<pylog.protocol {name}>", "exec"), self.namespace)  # noqa: S102
        return self.namespace[name]


def _min_size(field: Field, version: int, flexible: bool) -> int:
    """Fewest bytes a value of ``field`` takes on the wire (for array count checks)."""
    if field.is_array or field.type in ("string", "bytes", "records"):
        if flexible:
            return 1
        return 2 if field.type == "string" else 4
    if field.is_struct:
        if field.nullable(version):
            return 1
        return _struct_min_size(field.fields, version, flexible)
    return FIXED_SIZES[field.type]


def _struct_min_size(fields: tuple[Field, ...], version: int, flexible: bool) -> int:
    size = 1 if flexible else 0  # the tagged-field count
    for f in fields:
        if f.present(version) and not (flexible and f.tagged(version)):
            size += _min_size(f, version, flexible)
    return size


def _element_min_size(field: Field, version: int, flexible: bool) -> int:
    elem = field._replace(type=field.element_type, nullable_versions=None)
    # Never below one byte: an array of empty structs could otherwise claim 2**31
    # elements from a few bytes (no such struct exists in Kafka's schemas).
    return max(1, _min_size(elem, version, flexible))


def _split(fields: tuple[Field, ...], version: int, flexible: bool
           ) -> tuple[list[Field], list[Field], list[Field]]:
    """(regular fields in wire order, tagged fields by tag, fields absent from the version)."""
    regular, tagged, absent = [], [], []
    for f in fields:
        if not f.present(version):
            absent.append(f)
        elif flexible and f.tagged(version):
            tagged.append(f)
        else:
            regular.append(f)
    tagged.sort(key=lambda f: f.tag)
    return regular, tagged, absent


def _fixed_runs(fields: list[Field]) -> list[list[Field] | Field]:
    """Group consecutive fixed-size scalar fields; other fields stay alone."""
    out: list[list[Field] | Field] = []
    for f in fields:
        if f.type in FIXED_SIZES:
            if out and isinstance(out[-1], list):
                out[-1].append(f)
            else:
                out.append([f])
        else:
            out.append(f)
    return out


def _run_struct(src: _Source, run: list[Field]) -> tuple[str, int]:
    fmt = ">" + "".join(t.STRUCT_CODES[f.type] for f in run)
    packer = struct.Struct(fmt)
    return src.const(packer, "_S"), packer.size


def _default_expr(src: _Source, field: Field) -> str:
    if field.is_array:
        return "None" if field.default is None else "[]"
    if field.is_struct:
        return "None" if field.default is None else f"{src.cls(field.element_type)}()"
    if field.type == "uuid":
        return "_ZERO_UUID"
    return src.const(field.default) if isinstance(field.default, bytes) else repr(field.default)


# ----------------------------------------------------------------------------- decode


class _DecoderWriter:
    def __init__(self, src: _Source, version: int, flexible: bool) -> None:
        self.src, self.version, self.flexible = src, version, flexible

    def struct(self, ind: int, fields: tuple[Field, ...], struct_name: str, target: str) -> None:
        """Emit code that decodes one struct into the local ``target``."""
        src, v = self.src, self.version
        regular, tagged, absent = _split(fields, v, self.flexible)
        src.emit(ind, f"{target} = _new({src.cls(struct_name)})")
        src.emit(ind, f"{target}.{UNKNOWN_TAGS} = None")
        for f in absent + tagged:
            src.emit(ind, f"{target}.{f.name} = {_default_expr(src, f)}")
        for item in _fixed_runs(regular):
            if isinstance(item, list):
                name, size = _run_struct(src, item)
                lhs = ", ".join(f"{target}.{f.name}" for f in item)
                src.emit(ind, f"{lhs}, = {name}.unpack_from(buf, pos)")
                src.emit(ind, f"pos += {size}")
                for f in item:
                    if f.type == "uuid":
                        src.emit(ind, f"{target}.{f.name} = _uuid({target}.{f.name})")
            else:
                self.value(ind, item, f"{target}.{item.name}")
        if self.flexible:
            self.tag_section(ind, tagged, target)

    def uvarint(self, ind: int, var: str) -> None:
        self.src.emit(ind, f"{var} = buf[pos]")
        self.src.emit(ind, "pos += 1")
        self.src.emit(ind, f"if {var} & 0x80: {var}, pos = _uvt(buf, pos, {var})")

    def length(self, ind: int, field: Field, var: str, wide: bool) -> None:
        """Emit code leaving a length or count in ``var``, -1 for null (checked)."""
        src = self.src
        if self.flexible:
            self.uvarint(ind, var)
            src.emit(ind, f"{var} -= 1")
        else:
            src.emit(ind, f"{var}, = {'_I32u' if wide else '_I16u'}(buf, pos)")
            src.emit(ind, f"pos += {4 if wide else 2}")
            src.emit(ind, f"if {var} < -1: _fail('negative length {var} in {field.name}')")

    def value(self, ind: int, field: Field, target: str) -> None:
        """Emit code that decodes one (non-tagged-section) value into ``target``."""
        src, v = self.src, self.version
        nullable = field.nullable(v)
        null_stmt = (f"{target} = None" if nullable
                     else f"_fail('null in non-nullable field {field.name}')")
        ftype = field.type
        if field.is_array:
            count = src.var("c")
            self.length(ind, field, count, wide=True)
            src.emit(ind, f"if {count} < 0: {null_stmt}")
            min_size = _element_min_size(field, v, self.flexible)
            src.emit(ind, f"elif {count} * {min_size} > n - pos: "
                          f"_fail('array {field.name} longer than the bytes left')")
            src.emit(ind, "else:")
            self.array_elements(ind + 1, field, count, target)
        elif field.is_struct:
            if nullable:
                marker = src.var("m")
                src.emit(ind, f"{marker}, = _I8u(buf, pos)")
                src.emit(ind, "pos += 1")
                src.emit(ind, f"if {marker} < 0: {target} = None")
                src.emit(ind, "else:")
                ind += 1
            obj = src.var("o")
            self.struct(ind, field.fields, field.element_type, obj)
            src.emit(ind, f"{target} = {obj}")
        elif ftype in ("string", "bytes", "records"):
            length, end = src.var("L"), src.var("e")
            self.length(ind, field, length, wide=ftype != "string")
            src.emit(ind, f"if {length} < 0: {null_stmt}")
            src.emit(ind, "else:")
            src.emit(ind + 1, f"{end} = pos + {length}")
            src.emit(ind + 1, f"if {end} > n: _fail('{field.name} longer than the bytes left')")
            if ftype == "string":
                src.emit(ind + 1, f"{target} = str(buf[pos:{end}], 'utf-8')")
            elif ftype == "bytes":
                src.emit(ind + 1, f"{target} = bytes(buf[pos:{end}])")
            else:  # records: a zero-copy view of the input
                src.emit(ind + 1, f"{target} = buf[pos:{end}]")
            src.emit(ind + 1, f"pos = {end}")
        else:
            name, size = _run_struct(src, [field])
            src.emit(ind, f"{target}, = {name}.unpack_from(buf, pos)")
            src.emit(ind, f"pos += {size}")
            if ftype == "uuid":
                src.emit(ind, f"{target} = _uuid({target})")

    def array_elements(self, ind: int, field: Field, count: str, target: str) -> None:
        src = self.src
        elem_type = field.element_type
        if elem_type in FIXED_SIZES and elem_type != "uuid":
            code, size = t.STRUCT_CODES[elem_type], FIXED_SIZES[elem_type]
            src.emit(ind, f"{target} = list(_unpack_from('>%d{code}' % {count}, buf, pos))")
            src.emit(ind, f"pos += {count} * {size}")
            return
        items, append = src.var("a"), src.var("ap")
        src.emit(ind, f"{items} = []")
        src.emit(ind, f"{append} = {items}.append")
        src.emit(ind, f"for _ in range({count}):")
        elem = field._replace(type=elem_type, nullable_versions=None)
        if field.is_struct:
            obj = src.var("o")
            self.struct(ind + 1, field.fields, elem_type, obj)
            src.emit(ind + 1, f"{append}({obj})")
        else:
            value = src.var("x")
            self.value(ind + 1, elem, value)
            src.emit(ind + 1, f"{append}({value})")
        src.emit(ind, f"{target} = {items}")

    def tag_section(self, ind: int, tagged: list[Field], target: str) -> None:
        src = self.src
        count, tag, size, end = src.var("nt"), src.var("tg"), src.var("z"), src.var("e")
        self.uvarint(ind, count)
        src.emit(ind, f"if {count}:")  # usually none: skip the loop setup
        ind += 1
        src.emit(ind, f"for _ in range({count}):")
        ind += 1
        src.emit(ind, f"{tag}, pos = _ruv(buf, pos)")
        src.emit(ind, f"{size}, pos = _ruv(buf, pos)")
        src.emit(ind, f"{end} = pos + {size}")
        src.emit(ind, f"if {end} > n: _fail('tagged field longer than the bytes left')")
        keyword = "if"
        for f in tagged:
            src.emit(ind, f"{keyword} {tag} == {f.tag}:")
            self.value(ind + 1, f, f"{target}.{f.name}")
            src.emit(ind + 1, f"if pos != {end}: _fail('tagged field {f.name} size mismatch')")
            keyword = "elif"
        if tagged:
            src.emit(ind, "else:")
            ind += 1
        unknown = src.var("u")
        src.emit(ind, f"{unknown} = {target}.{UNKNOWN_TAGS}")
        src.emit(ind, f"if {unknown} is None: {unknown} = {target}.{UNKNOWN_TAGS} = {{}}")
        src.emit(ind, f"{unknown}[{tag}] = bytes(buf[pos:{end}])")
        src.emit(ind, f"pos = {end}")


def compile_decoder(schema: MessageSchema, version: int, classes: dict[str, type]) -> Decoder:
    src = _Source(classes)
    src.emit(0, "def decode(buf, pos, n):")
    writer = _DecoderWriter(src, version, schema.is_flexible(version))
    writer.struct(1, schema.fields, schema.name, "o0")
    src.emit(1, "return o0, pos")
    return src.build("decode")


# ----------------------------------------------------------------------------- encode


class _EncoderWriter:
    def __init__(self, src: _Source, version: int, flexible: bool) -> None:
        self.src, self.version, self.flexible = src, version, flexible

    def struct(self, ind: int, fields: tuple[Field, ...], struct_name: str, obj: str, ap: str
               ) -> None:
        """Emit code that encodes the struct held in local ``obj``."""
        src, v = self.src, self.version
        cls = src.cls(struct_name)
        src.emit(ind, f"if type({obj}) is not {cls}: {obj} = _coerce({cls}, {obj})")
        regular, tagged, _absent = _split(fields, v, self.flexible)
        for item in _fixed_runs(regular):
            if isinstance(item, list):
                name, _size = _run_struct(src, item)
                args = ", ".join(
                    f"_uuid_b({obj}.{f.name})" if f.type == "uuid" else f"{obj}.{f.name}"
                    for f in item)
                src.emit(ind, f"{ap}({name}.pack({args}))")
            else:
                value = src.var("v")
                src.emit(ind, f"{value} = {obj}.{item.name}")
                self.value(ind, item, value, ap)
        if self.flexible:
            self.tag_section(ind, tagged, obj, ap)

    def length(self, ind: int, length_expr: str, ap: str, wide: bool) -> None:
        """Emit code writing a non-null length or count."""
        src = self.src
        if self.flexible:
            n1 = src.var("l")
            src.emit(ind, f"{n1} = {length_expr} + 1")
            src.emit(ind, f"{ap}(_UV1[{n1}] if {n1} < 128 else _uv({n1}))")
        else:
            src.emit(ind, f"{ap}({'_I32p' if wide else '_I16p'}({length_expr}))")

    def null(self, ind: int, field: Field, ap: str, wide: bool) -> None:
        if not field.nullable(self.version):
            self.src.emit(ind, f"_fail('null in non-nullable field {field.name}')")
        elif self.flexible:
            self.src.emit(ind, f"{ap}(b'\\x00')")
        else:
            self.src.emit(ind, f"{ap}({(t.NULL_INT32 if wide else t.NULL_INT16)!r})")

    def value(self, ind: int, field: Field, value: str, ap: str) -> None:
        """Emit code encoding the value held in local ``value``."""
        src = self.src
        ftype = field.type
        if field.is_array:
            src.emit(ind, f"if {value} is None:")
            self.null(ind + 1, field, ap, wide=True)
            src.emit(ind, "else:")
            self.length(ind + 1, f"len({value})", ap, wide=True)
            self.array_elements(ind + 1, field, value, ap)
        elif field.is_struct:
            if field.nullable(self.version):
                src.emit(ind, f"if {value} is None: {ap}(b'\\xff')")
                src.emit(ind, "else:")
                ind += 1
                src.emit(ind, f"{ap}(b'\\x01')")
            self.struct(ind, field.fields, field.element_type, value, ap)
        elif ftype == "string":
            raw = src.var("b")
            src.emit(ind, f"if {value} is None:")
            self.null(ind + 1, field, ap, wide=False)
            src.emit(ind, "else:")
            src.emit(ind + 1, f"{raw} = {value}.encode()")
            self.length(ind + 1, f"len({raw})", ap, wide=False)
            src.emit(ind + 1, f"{ap}({raw})")
        elif ftype in ("bytes", "records"):
            size = src.var("L")
            src.emit(ind, f"if {value} is None:")
            self.null(ind + 1, field, ap, wide=True)
            src.emit(ind, f"elif type({value}) is bytes: {size} = len({value})")
            src.emit(ind, f"else: {value}, {size} = _piece({value})")
            src.emit(ind, f"if {value} is not None:")
            self.length(ind + 1, size, ap, wide=True)
            src.emit(ind + 1, f"{ap}({value})")
        else:
            name, _size = _run_struct(src, [field])
            arg = f"_uuid_b({value})" if ftype == "uuid" else value
            src.emit(ind, f"{ap}({name}.pack({arg}))")

    def array_elements(self, ind: int, field: Field, value: str, ap: str) -> None:
        src = self.src
        elem_type = field.element_type
        if elem_type in FIXED_SIZES and elem_type != "uuid":
            code = t.STRUCT_CODES[elem_type]
            src.emit(ind, f"{ap}(_pack('>%d{code}' % len({value}), *{value}))")
            return
        elem = src.var("x")
        src.emit(ind, f"for {elem} in {value}:")
        if field.is_struct:
            self.struct(ind + 1, field.fields, elem_type, elem, ap)
        else:
            self.value(ind + 1, field._replace(type=elem_type, nullable_versions=None), elem, ap)

    def tag_section(self, ind: int, tagged: list[Field], obj: str, ap: str) -> None:
        src = self.src
        if not tagged:
            unknown = src.var("u")
            src.emit(ind, f"{unknown} = {obj}.{UNKNOWN_TAGS}")
            src.emit(ind, f"if {unknown}: _wt({ap}, [], {unknown})")
            src.emit(ind, f"else: {ap}(b'\\x00')")
            return
        tags = src.var("tags")
        src.emit(ind, f"{tags} = []")
        for f in tagged:
            value = src.var("v")
            src.emit(ind, f"{value} = {obj}.{f.name}")
            src.emit(ind, f"if {self.differs_from_default(f, value)}:")
            parts = src.var("p")
            src.emit(ind + 1, f"{parts} = []")
            self.value(ind + 1, f, value, f"{parts}.append")
            src.emit(ind + 1, f"{tags}.append(({f.tag}, b''.join({parts})))")
        src.emit(ind, f"_wt({ap}, {tags}, {obj}.{UNKNOWN_TAGS})")

    def differs_from_default(self, field: Field, value: str) -> str:
        """Kafka writes a tagged field only when it differs from its default."""
        src = self.src
        if field.default is None:
            return f"{value} is not None"
        if field.is_array:
            return value  # default: empty
        if field.is_struct:
            cls = self.src.classes[field.element_type]
            return f"_coerce({src.cls(field.element_type)}, {value}) != {src.const(cls(), '_D')}"
        if field.type == "uuid":
            return f"_uuid_b({value}) != _Z16"
        return f"{value} != {src.const(field.default, '_D')}"


def compile_encoder(schema: MessageSchema, version: int, classes: dict[str, type]) -> Encoder:
    src = _Source(classes)
    src.emit(0, "def encode(o0, ap):")
    writer = _EncoderWriter(src, version, schema.is_flexible(version))
    writer.struct(1, schema.fields, schema.name, "o0", "ap")
    return src.build("encode")


def decoder_source(schema: MessageSchema, version: int, classes: dict[str, type]) -> str:
    """The generated decoder's source, for reading and debugging."""
    src = _Source(classes)
    src.emit(0, "def decode(buf, pos, n):")
    _DecoderWriter(src, version, schema.is_flexible(version)).struct(1, schema.fields,
                                                                      schema.name, "o0")
    return "\n".join(src.lines)


def encoder_source(schema: MessageSchema, version: int, classes: dict[str, type]) -> str:
    src = _Source(classes)
    src.emit(0, "def encode(o0, ap):")
    _EncoderWriter(src, version, schema.is_flexible(version)).struct(1, schema.fields,
                                                                      schema.name, "o0", "ap")
    return "\n".join(src.lines)
