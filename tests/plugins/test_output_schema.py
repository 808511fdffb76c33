"""`output-schema` in `opennua.toml`: a JSON Schema file, read and checked with the plugin
(so at validate and publish); a bad one is a PluginError naming its file and line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from opennua.plugins import PluginError, read_plugin
from opennua.runtime import agent_from_plugin

FIXTURE = Path(__file__).parent / "fixtures" / "claude_layout"

RESULT = {
    "type": "object",
    "required": ["category", "severity"],
    "properties": {
        "category": {"type": "string", "enum": ["bug", "question", "idea"]},
        "severity": {"type": "integer", "minimum": 1, "maximum": 4},
    },
    "additionalProperties": False,
}


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    dest = tmp_path / "writer"
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _declare(root: Path, schema_text: str | None, settings: str = "") -> None:
    toml = root / "opennua.toml"
    toml.write_text(f'output-schema = "schemas/result.json"\n{settings}' + toml.read_text())
    if schema_text is not None:
        (root / "schemas").mkdir(exist_ok=True)
        (root / "schemas" / "result.json").write_text(schema_text)


def _error(root: Path) -> PluginError:
    with pytest.raises(PluginError) as info:
        read_plugin(root)
    return info.value


def test_a_declared_schema_is_read_and_pinned_by_the_agent(plugin_dir: Path) -> None:
    plain = agent_from_plugin(plugin_dir, read_plugin(plugin_dir), model="scripted:demo")
    _declare(plugin_dir, json.dumps(RESULT, indent=2), "output-retries = 3\n")
    plugin = read_plugin(plugin_dir)
    assert plugin.settings.output_schema == RESULT
    assert plugin.settings.output_schema_file == "schemas/result.json"
    assert plugin.settings.output_retries == 3
    agent = agent_from_plugin(plugin_dir, plugin, model="scripted:demo")
    assert (agent.output_schema, agent.output_retries) == (RESULT, 3)
    # The schema is part of what runs: a checkpoint of the agent without it is refused.
    assert agent.describe()["output_schema"] == RESULT
    assert agent.digest not in plain.equivalent_digests


def test_without_a_schema_nothing_is_declared_and_retries_default(plugin_dir: Path) -> None:
    settings = read_plugin(plugin_dir).settings
    assert (settings.output_schema, settings.output_retries) == (None, 2)


def test_a_schema_that_is_not_a_json_schema_names_its_line(plugin_dir: Path) -> None:
    bad = dict(RESULT, properties={"severity": {"type": "integr"}})
    _declare(plugin_dir, json.dumps(bad, indent=2))
    error = _error(plugin_dir)
    assert error.file == "schemas/result.json"
    text = (plugin_dir / "schemas" / "result.json").read_text().splitlines()
    assert error.line is not None and '"type": "integr"' in text[error.line - 1], error.line
    assert "not a valid JSON Schema at properties/severity/type" in error.message


@pytest.mark.parametrize(
    ("text", "said", "line"),
    [
        ('{\n  "type": "object",\n}', "malformed JSON", 3),
        ('["type", "object"]', "must be a JSON object", 1),
        ('{\n  "$schema": "https://x.test/mine",\n  "type": "object"\n}', "unknown $schema", 2),
        (
            '{\n  "type": "object",\n  "properties": {"a": {"$ref": "https://x.test/a.json"}}\n}',
            "points outside the schema file",
            3,
        ),
    ],
)
def test_malformed_unknown_or_remote_schemas_are_refused(
    plugin_dir: Path, text: str, said: str, line: int
) -> None:
    _declare(plugin_dir, text)
    error = _error(plugin_dir)
    assert (error.file, error.line) == ("schemas/result.json", line) and said in error.message


def test_an_older_draft_is_checked_by_its_own_meta_schema(plugin_dir: Path) -> None:
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", **RESULT}
    _declare(plugin_dir, json.dumps(draft7))
    assert read_plugin(plugin_dir).settings.output_schema == draft7
    (plugin_dir / "schemas" / "result.json").write_text(
        json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "minimum": "one"})
    )
    assert "not a valid JSON Schema at minimum" in _error(plugin_dir).message


def test_settings_errors_name_the_setting_line(plugin_dir: Path) -> None:
    _declare(plugin_dir, None)
    error = _error(plugin_dir)
    assert (error.file, error.line) == ("opennua.toml", 1) and "is not in the plugin" in str(error)
    toml = plugin_dir / "opennua.toml"
    rest = toml.read_text().split("\n", 1)[1]
    for setting, said in [
        ("output-schema = 3", "must be the path of a JSON Schema file"),
        ('output-schema = "s.json"\noutput-retries = -1', "output-retries must be 0 to 10"),
        ('output-schema = "s.json"\noutput-retries = "two"', "must be a whole number"),
        ("output-retries = 1", "needs an output-schema"),
    ]:
        (plugin_dir / "s.json").write_text("{}")
        toml.write_text(f"{setting}\n{rest}")
        error = _error(plugin_dir)
        assert error.file == "opennua.toml" and said in error.message, (setting, error)
        assert error.line == setting.count("\n") + 1
