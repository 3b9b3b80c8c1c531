"""The generated schema module is current and holds wire facts only."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pylog.protocol import schema_gen

REPO = Path(__file__).resolve().parent.parent
GENERATOR = REPO / "tools" / "gen_protocol.py"
SOURCE = REPO.parent / "shared" / "kafka-protocol"
GENERATED = REPO / "pylog" / "protocol" / "schema_gen.py"

needs_source = pytest.mark.skipif(not (SOURCE / "messages").is_dir(),
                                  reason="Kafka schema reference data not present")


@needs_source
def test_committed_module_is_current() -> None:
    result = subprocess.run([sys.executable, str(GENERATOR), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@needs_source
def test_check_detects_a_stale_module(tmp_path: Path) -> None:
    stale = tmp_path / "schema_gen.py"
    stale.write_text(GENERATED.read_text().replace("'Produce'", "'Produced'"))
    result = subprocess.run([sys.executable, str(GENERATOR), "--check", "--output", str(stale)],
                            capture_output=True, text=True)
    assert result.returncode == 1


def _about_texts() -> list[str]:
    texts = []
    for path in (SOURCE / "messages").glob("*.json"):
        texts += re.findall(r'"about"\s*:\s*"((?:[^"\\]|\\.)*)"', path.read_text())
    return [json.loads(f'"{t}"') for t in texts]


@needs_source
def test_no_prose_in_generated_module() -> None:
    text = GENERATED.read_text()
    for about in _about_texts():
        if len(about.split()) >= 4:
            assert about not in text
    messages = [line.split(",", 2)[2] for line in
                (SOURCE / "error_codes.csv").read_text().splitlines()[1:] if line.count(",") >= 2]
    for message in messages:
        if len(message.split()) >= 4:
            assert message.strip('"') not in text
    # No long English sentences anywhere in the string literals either.
    for literal in re.findall(r"'([^']*)'", text):
        assert len(literal.split()) < 4, literal


def test_tables_cover_the_apis() -> None:
    assert schema_gen.API_NAMES[0] == "Produce"
    assert schema_gen.MESSAGES[(18, "response")][0] == "ApiVersionsResponse"
    assert schema_gen.ERRORS[35] == "UNSUPPORTED_VERSION"
    for api_key in schema_gen.API_NAMES:
        assert (api_key, "request") in schema_gen.MESSAGES
        assert (api_key, "response") in schema_gen.MESSAGES
