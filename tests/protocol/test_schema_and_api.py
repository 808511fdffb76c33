from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import opennua.protocol
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


def test_public_api_is_pinned() -> None:
    assert sorted(opennua.protocol.__all__) == [
        "ACTION_TYPES",
        "Accepted",
        "Action",
        "AnswerInput",
        "Cancel",
        "Conflict",
        "Intent",
        "IntentResult",
        "InvalidAction",
        "Rejected",
        "RetryTurn",
        "SendMessage",
        "SequenceGap",
        "Session",
        "UnknownAction",
        "UpdateSession",
        "action_from_dict",
        "action_from_json",
        "action_id",
        "action_to_dict",
        "action_to_json",
        "copy_state",
        "initial_state",
        "json_schemas",
        "new_id",
        "reduce",
        "replay",
        "state_from_json",
        "state_to_json",
    ]
    for name in opennua.protocol.__all__:
        assert hasattr(opennua.protocol, name)
