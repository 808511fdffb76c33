"""What a deployment supplies a real plugin with (issue 30, part B): model aliases, the
URL of a placeholder server, `${VAR}`s, which servers are required; and the warnings about
what it leaves out, by the same rules the runtime runs by."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from opennua.host import DeploymentSpec, Hub, SessionHost
from opennua.host._registry import deployment_digest, deployment_problems
from opennua.plugins import read_plugin
from opennua.protocol import CreateSession, SendMessage
from opennua.runtime import default_agent
from opennua.store import Store, open_store
from opennua.supervisor._snapshot import Bound, _with_sandbox_env, agent_for


def _plugin(root: Path) -> Path:
    (root / ".claude-plugin").mkdir(parents=True)
    manifest = {"name": "real", "version": "1.0.0", "description": "as published"}
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    (root / "agents").mkdir()
    for name, model in (
        ("deep", "opus"),
        ("quick", "haiku"),
        ("same", "inherit"),
        ("own", "openai:gpt-4o"),
    ):
        (root / "agents" / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: {name}\nmodel: {model}\n---\nWork.\n"
        )
    servers = {
        "calendar": {"type": "http", "url": ""},
        "events": {"type": "sse", "url": "https://${EVENTS_HOST}/sse"},
        "tracker": {
            "command": "${NODE:-node}",
            "args": ["${CLAUDE_PLUGIN_ROOT}/server.js", "--team", "${TEAM}"],
            "env": {"TRACKER_TOKEN": "${TRACKER_TOKEN}"},
        },
    }
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return root


async def _bound(store: Store, host: SessionHost, deployment: str, cache: Path) -> Bound:
    created = await host.submit(
        None, CreateSession(intent_id=f"int_{deployment}", client_id="cli_t", deployment=deployment)
    )
    sid = created.ids["session_id"]  # type: ignore[union-attr]
    content: list[dict[str, Any]] = [{"type": "text", "text": "hi"}]
    await host.submit(
        sid, SendMessage(intent_id=f"int_m_{deployment}", client_id="cli_t", content=content)
    )
    (execution,) = await store.list_executions(sid)
    return await agent_for(store, default_agent(), execution, cache)


async def test_a_deployment_supplies_what_a_real_plugin_leaves_open(tmp_path: Path) -> None:
    async with await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path) as store:
        host = SessionHost(store, Hub(store))
        registry = host.registry
        await registry.ensure_builtin("scripted:demo")
        published = (await registry.publish_dir(_plugin(tmp_path / "plugin"))).version
        await registry.release("real", "stable", published.version)

        # Nothing supplied: every gap is a warning, none refuses the deployment.
        bare = DeploymentSpec(plugin="real", model="openai:gpt-4o-mini")
        await registry.deploy("bare", bare)
        warned = [p.message for p in await registry.problems(bare)]
        assert any("'calendar' has no URL" in m for m in warned), warned
        assert any("'events' needs ${EVENTS_HOST}" in m for m in warned), warned
        assert any("'tracker' needs ${TEAM}" in m for m in warned), warned
        assert any("'tracker' needs ${TRACKER_TOKEN}" in m for m in warned), warned
        assert not any("${NODE}" in m for m in warned)  # it has a default
        assert any("'deep' asks for model 'opus'" in m for m in warned), warned
        assert any("'quick' asks for model 'haiku'" in m for m in warned), warned
        assert len(warned) == 6
        agent = (await _bound(store, host, "bare", tmp_path / "cache")).agent
        # The placeholder is left out; the others start (or say why not) at run time.
        assert [s.name for s in agent.mcp_servers] == ["events", "tracker"]
        models = {s.name: s.model for s in agent.subagents}
        # Unmapped aliases and `inherit` run the deployment's model; a full name stays.
        assert models == {"deep": None, "quick": None, "same": None, "own": "openai:gpt-4o"}

        # Supplied: a URL for the placeholder, the variables, an alias, a required server.
        full = DeploymentSpec(
            plugin="real",
            model="openai:gpt-4o-mini",
            model_aliases={"opus": "openai:o3"},
            env={"EVENTS_HOST": "events.example.org", "TEAM": "core"},
            tools={"calendar": {"url": "https://cal.example.org/mcp", "required": True}},
        )
        await registry.deploy("full", full)
        warned = [p.message for p in await registry.problems(full)]
        assert len(warned) == 2, warned
        assert "'tracker' needs ${TRACKER_TOKEN}" in warned[0]
        assert "'quick' asks for model 'haiku'" in warned[1]
        # A sandbox secret of that name defines it (the operator's switch, confirmed).
        secreted = DeploymentSpec.model_validate(
            full.model_dump()
            | {
                "sandbox_env": [{"server": "tracker", "env": "TRACKER_TOKEN", "secret": "tt"}],
                "sandbox_env_confirmed": True,
            }
        )
        assert len(await registry.problems(secreted)) == 1

        bound = await _bound(store, host, "full", tmp_path / "cache")
        assert {s.name: s.model for s in bound.agent.subagents}["deep"] == "openai:o3"
        servers = {s.name: s for s in bound.agent.mcp_servers}
        assert servers["calendar"].url == "https://cal.example.org/mcp"
        assert servers["calendar"].required and not servers["tracker"].required
        assert servers["events"].transport == "sse"
        assert servers["tracker"].variables == {"EVENTS_HOST": "events.example.org", "TEAM": "core"}

        async def secret(workspace_id: str, name: str) -> str:
            return "tok-123"

        entries = [{"server": "tracker", "env": "TRACKER_TOKEN", "secret": "tt"}]
        agent = await _with_sandbox_env(bound.agent, entries, "wsp_1", secret)
        tracker = next(s for s in agent.mcp_servers if s.name == "tracker")
        assert tracker.variables is not None and tracker.variables["TRACKER_TOKEN"] == "tok-123"
        assert tracker.secret_values == {"TRACKER_TOKEN": "tok-123"}  # redacted from stderr
        assert agent.digest == bound.agent.digest  # values are not the definition


async def test_anthropic_deployments_map_aliases_to_current_models(tmp_path: Path) -> None:
    async with await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path) as store:
        host = SessionHost(store, Hub(store))
        await host.registry.ensure_builtin("scripted:demo")
        published = (await host.registry.publish_dir(_plugin(tmp_path / "plugin"))).version
        await host.registry.release("real", "stable", published.version)
        spec = DeploymentSpec(plugin="real", model="anthropic:claude-sonnet-4-5")
        await host.registry.deploy("claude", spec)
        assert not any("asks for model" in p.message for p in await host.registry.problems(spec))
        agent = (await _bound(store, host, "claude", tmp_path / "cache")).agent
        models = {s.name: s.model for s in agent.subagents}
        assert models["deep"] == "anthropic:claude-opus-4-5"
        assert models["quick"] == "anthropic:claude-haiku-4-5"
        assert models["same"] is None  # inherit: the deployment's own


def test_a_deployment_from_before_these_fields_keeps_its_digest() -> None:
    spec = DeploymentSpec(plugin="p", model="scripted:demo", tools={"s": {"url": "https://x/"}})
    # As digested before model_aliases, env and required existed.
    before = {
        "name": "d",
        **spec.model_dump(mode="json", exclude={"egress", "model_aliases", "env"}),
    }
    before["tools"] = {"s": {"url": "https://x/", "command": None, "args": None}}
    canonical = json.dumps(before, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert (
        deployment_digest("d", spec) == "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    )
    required = spec.model_dump() | {"tools": {"s": {"url": "https://x/", "required": True}}}
    assert deployment_digest("d", DeploymentSpec.model_validate(required)) != (
        deployment_digest("d", spec)
    )


@pytest.mark.parametrize("value", ["a\x00b", "\x00"])
def test_an_env_value_no_process_could_carry_is_refused_at_save(value: str) -> None:
    with pytest.raises(ValidationError, match="env"):
        DeploymentSpec.model_validate({"plugin": "p", "model": "a:b", "env": {"K": value}})
    # Any other text, newlines included, is a value an environment can hold.
    kept = DeploymentSpec.model_validate({"plugin": "p", "model": "a:b", "env": {"K": "x\ny"}})
    assert kept.env == {"K": "x\ny"}


def test_a_deployment_says_which_claude_code_tools_its_agents_run_without(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text('{"name": "p", "version": "1.0.0"}')
    (root / "agents").mkdir()
    (root / "agents" / "nb.md").write_text(
        "---\nname: nb\ndescription: edits notebooks\ntools: Read, NotebookEdit, Grep\n---\nGo.\n"
    )
    spec = DeploymentSpec.model_validate({"plugin": "p", "model": "scripted:demo"})
    said = [(p.file, p.message) for p in deployment_problems(read_plugin(root), spec)]
    assert said == [
        (
            "agents/nb.md",
            "tool NotebookEdit is not supported by opennua; this deployment runs without it",
        )
    ]
