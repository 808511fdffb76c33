"""The supervisor's view of an execution snapshot: the agent is the session's plugin
version (materialized from the blob store by digest) with the snapshot's model, and the
deployment's limits are the execution's budget and its tool connections say how the
plugin's MCP servers are reached."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from opennua.host import DeploymentSpec, Hub, SessionHost
from opennua.protocol import CreateSession, SendMessage
from opennua.runtime import default_agent
from opennua.store import open_store
from opennua.supervisor._snapshot import Agents, SnapshotMismatch, agent_for

FIXTURE = Path(__file__).parents[1] / "plugins" / "fixtures" / "claude_layout"


async def test_the_agent_and_budget_come_from_the_snapshot(tmp_path: Path) -> None:
    async with await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path) as store:
        host = SessionHost(store, Hub(store))
        await host.registry.ensure_builtin("scripted:demo")
        published = (await host.registry.publish_dir(FIXTURE)).version
        await host.registry.release(published.name, "stable", published.version)
        limits = {"max_steps": 3, "max_tokens": 900, "max_cost_usd": 0.25, "deadline_seconds": 60}
        override = {"notes": {"command": "python3.11"}}
        spec = DeploymentSpec(
            plugin=published.name, model="test:snap", limits=limits, tools=override
        )
        await host.registry.deploy("support", spec)
        created = await host.submit(
            None, CreateSession(intent_id="int_1", client_id="cli_t", deployment="support")
        )
        sid = created.ids["session_id"]  # type: ignore[union-attr]
        sent = await host.submit(
            sid,
            SendMessage(
                intent_id="int_2", client_id="cli_t", content=[{"type": "text", "text": "hi"}]
            ),
        )
        (execution,) = await store.list_executions(sid)
        assert sent.type == "accepted"

        bound = await agent_for(store, default_agent(), execution, tmp_path / "plugins")
        agent, budget = bound.agent, bound.limits
        assert agent.name == published.name and agent.model == "test:snap"
        # The deployment's tool connection, not the plugin's `.mcp.json`, says how.
        assert [(m.name, m.command) for m in agent.mcp_servers] == [("notes", "python3.11")]
        assert (tmp_path / "plugins" / published.digest.removeprefix("sha256:")).is_dir()
        assert budget is not None
        assert (budget.max_steps, budget.max_tokens, budget.max_cost_usd) == (3, 900, 0.25)
        assert budget.deadline == execution.deadline_at

        # An execution that claims another snapshot than its session's is refused.
        other = dataclasses.replace(execution, snapshot_digest="sha256:x")
        with pytest.raises(SnapshotMismatch, match="its session is bound to"):
            await agent_for(store, default_agent(), other, tmp_path / "plugins")


async def test_a_supervisor_builds_the_agent_of_a_snapshot_once(tmp_path: Path) -> None:
    """Later attempts on the same snapshot digest reuse the agent: no re-read of the
    plugin's files, no rebuild; the session's binding is still checked every time."""
    async with await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path) as store:
        host = SessionHost(store, Hub(store))
        await host.registry.ensure_builtin("scripted:demo")
        published = (await host.registry.publish_dir(FIXTURE)).version
        await host.registry.release(published.name, "stable", published.version)
        spec = DeploymentSpec(plugin=published.name, model="test:snap", limits={"max_steps": 4})
        await host.registry.deploy("support", spec)
        created = await host.submit(
            None, CreateSession(intent_id="int_1", client_id="cli_t", deployment="support")
        )
        sid = created.ids["session_id"]  # type: ignore[union-attr]
        text = [{"type": "text", "text": "hi"}]
        await host.submit(sid, SendMessage(intent_id="int_2", client_id="cli_t", content=text))
        (execution,) = await store.list_executions(sid)
        agents, cache = Agents(), tmp_path / "plugins"

        first = await agent_for(store, default_agent(), execution, cache, agents=agents)
        shutil.rmtree(cache)  # a rebuild would materialize it again
        again = await agent_for(store, default_agent(), execution, cache, agents=agents)
        assert again.agent is first.agent and not cache.exists()
        assert again.limits is not None and again.limits.max_steps == 4
        other = dataclasses.replace(execution, snapshot_digest="sha256:x")
        with pytest.raises(SnapshotMismatch, match="its session is bound to"):
            await agent_for(store, default_agent(), other, cache, agents=agents)
