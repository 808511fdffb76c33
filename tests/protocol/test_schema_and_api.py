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
