#!/usr/bin/env python3
"""Generate ``pylog/protocol/schema_gen.py`` from Kafka's message schemas.

The schemas (``messages/*.json``) and ``error_codes.csv`` are reference data kept
outside the repository; this tool distils their wire facts (API keys, versions,
field names, types, tags, defaults, error codes and names) into a plain Python
module and drops every piece of prose ("about" texts, comments, error messages).

    python tools/gen_protocol.py            # (re)write the module
    python tools/gen_protocol.py --check    # exit 1 if the committed module is stale
    python tools/gen_protocol.py --source DIR --output FILE
"""

from __future__ import annotations

import argparse
import csv
import json
import keyword
import re
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO_ROOT.parent / "shared" / "kafka-protocol"
DEFAULT_OUTPUT = REPO_ROOT / "pylog" / "protocol" / "schema_gen.py"

PRIMITIVES = {
    "bool", "int8", "int16", "uint16", "int32", "int64", "uint32", "float64",
    "string", "bytes", "uuid", "records",
}
INT_TYPES = {"int8", "int16", "uint16", "int32", "int64", "uint32"}

Versions = tuple[int, int | None] | None


def snake_case(name: str) -> str:
    """Kafka's CamelCase field names as Python attribute names.

    ``ThrottleTimeMs`` -> ``throttle_time_ms``, ``IsrNodes`` -> ``isr_nodes``,
    ``KRaftVersion`` -> ``k_raft_version`` (an underscore before every capital that
    follows a lower-case letter or digit, or that starts a capitalised word after
    a run of capitals).
    """
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return snake + "_" if keyword.iskeyword(snake) else snake


def parse_versions(spec: str) -> Versions:
    """``"3+"`` -> (3, None); ``"1-4"`` -> (1, 4); ``"2"`` -> (2, 2); ``"none"`` -> None."""
    spec = spec.strip()
    if spec == "none":
        return None
    if spec.endswith("+"):
        return (int(spec[:-1]), None)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def load_json(path: Path) -> dict[str, Any]:
    """Kafka's schema files are JSON with ``//`` line comments."""
    text = re.sub(r"^\s*//.*$", "", path.read_text(encoding="utf-8"), flags=re.M)
    return json.loads(text)


def effective_default(ftype: str, raw: Any) -> Any:
    """The value Kafka's generated classes start a field with.

    Numbers and bools as Python values, strings as str or None (null), bytes as
    b"" or None, records as None, uuids as None (meaning the zero UUID; uuids are
    never null), arrays as () (empty) or None (null), structs as () (a struct of
    defaults) or None (null).
    """
    if raw == "null":
        return None
    if ftype in INT_TYPES:
        return int(raw, 0) if isinstance(raw, str) else int(raw or 0)
    if ftype == "float64":
        return float(raw or 0)
    if ftype == "bool":
        return raw is True or raw == "true"
    if ftype == "string":
        return "" if raw is None else str(raw)
    if ftype == "bytes":
        return b""
    if ftype in ("records", "uuid"):
        return None
    return ()  # arrays and structs


def convert_fields(fields: list[dict[str, Any]], common: dict[str, list]) -> tuple:
    out = []
    for f in fields:
        ftype = f["type"]
        struct_name = ftype[2:] if ftype.startswith("[]") else ftype
        sub = None
        if struct_name not in PRIMITIVES:
            sub_json = f.get("fields", common.get(struct_name))
            if sub_json is None:
                raise SystemExit(f"unknown struct type {ftype} in field {f['name']}")
            sub = convert_fields(sub_json, common)
        if f.get("flexibleVersions", "").strip() not in ("", "none"):
            raise SystemExit(f"unsupported field-level flexibleVersions on {f['name']}")
        tag = f.get("tag")
        out.append((
            snake_case(f["name"]),
            f["name"],
            ftype,
            parse_versions(f["versions"]),
            parse_versions(f.get("nullableVersions", "none")),
            tag,
            parse_versions(f["taggedVersions"]) if tag is not None else None,
            effective_default(ftype, f.get("default")),
            sub,
        ))
    return tuple(out)


def read_source(source: Path) -> dict[str, Any]:
    messages: dict[tuple[int, str], tuple] = {}
    api_names: dict[int, str] = {}
    headers: dict[str, tuple] = {}
    for path in sorted((source / "messages").glob("*.json")):
        doc = load_json(path)
        kind = doc["type"]
        if kind not in ("request", "response", "header"):
            continue  # record/data schemas are not wire messages
        common = {c["name"]: c["fields"] for c in doc.get("commonStructs", [])}
        fields = convert_fields(doc["fields"], common)
        valid = parse_versions(doc["validVersions"])
        flexible = parse_versions(doc["flexibleVersions"])
        if kind == "header":
            headers[doc["name"]] = (valid, flexible, fields)
            continue
        api_key = doc["apiKey"]
        base = doc["name"][: -len("Request" if kind == "request" else "Response")]
        api_names[api_key] = base
        unstable = bool(doc.get("latestVersionUnstable", False))
        messages[(api_key, kind)] = (doc["name"], valid, flexible, fields, unstable)
    errors: dict[int, str] = {}
    with open(source / "error_codes.csv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            errors[int(row["code"])] = row["name"].strip()
    return {"messages": messages, "api_names": api_names, "headers": headers, "errors": errors}


def fmt_fields(fields: tuple, indent: int) -> list[str]:
    pad = " " * indent
    lines = []
    for f in fields:
        head = ", ".join(repr(x) for x in f[:8])
        if f[8] is None:
            lines.append(f"{pad}({head}, None),")
        else:
            lines.append(f"{pad}({head}, (")
            lines.extend(fmt_fields(f[8], indent + 4))
            lines.append(f"{pad})),")
    return lines


HEADER = '''\
"""Kafka protocol wire facts, generated by tools/gen_protocol.py. Do not edit.

Regenerate with ``python tools/gen_protocol.py``; ``--check`` tells whether this
file is current. Versions are (min, max) with max None for "and later", or None
for "no versions".

API_NAMES: api key -> API name.
MESSAGES: (api key, "request" | "response") ->
    (message name, valid versions, flexible versions, fields, latest version unstable)
HEADERS: "RequestHeader" | "ResponseHeader" -> (valid versions, flexible versions, fields)
A field is (python name, kafka name, type, versions, nullable versions, tag,
    tagged versions, default, sub-fields of a struct type or None).
Defaults: numbers/bools as values; str or None (null); b"" or None; records None;
    uuid None (the zero UUID); arrays and structs () (empty / all defaults) or None.
ERRORS: error code -> error name.
"""
'''


def render(data: dict[str, Any]) -> str:
    lines = [HEADER, "API_NAMES = {"]
    for key in sorted(data["api_names"]):
        lines.append(f"    {key}: {data['api_names'][key]!r},")
    lines += ["}", "", "MESSAGES = {"]
    for key in sorted(data["messages"]):
        name, valid, flexible, fields, unstable = data["messages"][key]
        lines.append(f"    {key!r}: ({name!r}, {valid!r}, {flexible!r}, (")
        lines.extend(fmt_fields(fields, 8))
        lines.append(f"    ), {unstable!r}),")
    lines += ["}", "", "HEADERS = {"]
    for name in sorted(data["headers"]):
        valid, flexible, fields = data["headers"][name]
        lines.append(f"    {name!r}: ({valid!r}, {flexible!r}, (")
        lines.extend(fmt_fields(fields, 8))
        lines.append("    )),")
    lines += ["}", "", "ERRORS = {"]
    for code in sorted(data["errors"]):
        lines.append(f"    {code}: {data['errors'][code]!r},")
    lines += ["}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE,
                        help="directory holding messages/*.json and error_codes.csv")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the output file differs from what would be written")
    args = parser.parse_args(argv)
    text = render(read_source(args.source))
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
        if current != text:
            print(f"{args.output} is stale; run python tools/gen_protocol.py", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
