from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opennua.cli import app
from opennua.cli._schema import render_schema
from opennua.protocol.schema import SCHEMA_NAMES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "schema"


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_committed_schema_is_current(name: str) -> None:
    committed = (DOCS / f"{name}.schema.json").read_text(encoding="utf-8")
    assert committed == render_schema(name), "stale: run `nua schema --out docs/schema`"


def _undocumented(node: object, where: str = "") -> list[str]:
    """Every property of a JSON Schema without a `description`, by path."""
    found: list[str] = []
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            if not (isinstance(prop, dict) and prop.get("description")):
                found.append(f"{where}.{name}")
        for key, value in node.items():
            found += _undocumented(value, f"{where}/{key}")
    elif isinstance(node, list):
        for n, value in enumerate(node):
            found += _undocumented(value, f"{where}[{n}]")
    return found


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_every_field_of_the_protocol_is_documented(name: str) -> None:
    """Clients read the protocol in the schema: each property says what it means."""
    schema = json.loads((DOCS / f"{name}.schema.json").read_text(encoding="utf-8"))
    assert _undocumented(schema) == []


def test_nua_schema_prints_every_schema() -> None:
    result = CliRunner().invoke(app, ["schema"])
    assert result.exit_code == 0
    bundle = json.loads(result.output)
    assert set(bundle) == set(SCHEMA_NAMES)
    assert "tool_call.updated" in json.dumps(bundle["action"])


def test_nua_schema_rejects_an_unknown_name_with_exit_2() -> None:
    result = CliRunner().invoke(app, ["schema", "bogus"])
    assert result.exit_code == 2
    assert "unknown schema" in result.output
