"""`.a2a.json`: remote A2A agents a plugin's model may message. Read and checked like
`.mcp.json`'s remote servers (errors name the file and line), one namespace with them; a
deployment overrides an agent's URL and binds its credential as for an MCP server; the
runtime offers each as `<prefix>__send_message`, within the egress list."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from opennua.host import DeploymentSpec, Refused, Registry
from opennua.plugins import A2aAgentSpec, PluginError, read_plugin
from opennua.runtime import agent_from_plugin
from opennua.store import open_store

FIXTURE = Path(__file__).parent / "fixtures" / "claude_layout"


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    dest = tmp_path / "writer"
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "opennua.toml").write_text('[access]\negress = ["agents.example.com"]\n')
    return dest


def _agents(root: Path, agents: Any) -> Path:
    (root / ".a2a.json").write_text(json.dumps({"agents": agents}, indent=2))
    return root


def _error(path: Path) -> PluginError:
    with pytest.raises(PluginError) as info:
        read_plugin(path)
    return info.value


def test_agents_are_read_with_their_prefix_and_description(plugin_dir: Path) -> None:
    _agents(
        plugin_dir,
        {
            "Review Bot": {
                "url": "https://agents.example.com/v1/a2a/review",
                "description": "reviews drafts",
            },
            "later": {"url": ""},
        },
    )
    plugin = read_plugin(plugin_dir)
    review, later = plugin.a2a_agents
    assert review == A2aAgentSpec(
        "Review Bot", "https://agents.example.com/v1/a2a/review", "reviews drafts"
    )
    assert review.prefix == "Review_Bot" and review.configured
    assert not later.configured  # a placeholder: a deployment gives its URL
    assert any(p.file == ".a2a.json" and "later" in p.message for p in plugin.problems)
    # Listed beside the MCP servers (`nua plugin show`, a version's `servers`).
    assert plugin.connections()[-2:] == [
        {"name": "Review Bot", "prefix": "Review_Bot", "transport": "a2a", "configured": True},
        {"name": "later", "prefix": "later", "transport": "a2a", "configured": False},
    ]


@pytest.mark.parametrize(
    ("agents", "said"),
    [
        ([], 'expected {"agents"'),
        ({"x": "https://agents.example.com"}, "agent 'x': must be an object"),
        ({"x": {"description": "no url"}}, "agent 'x': needs a url"),
        ({"x": {"url": "ftp://agents.example.com/a"}}, "agent 'x': url must be an http(s) URL"),
        ({"x": {"url": "https://a.example.com", "headers": {"k": 1}}}, "headers must map"),
        ({"x": {"url": "https://a.example.com", "description": 3}}, "description must be"),
        # One namespace with .mcp.json's servers (the fixture's is `notes`).
        ({"notes": {"url": "https://a.example.com"}}, "also an MCP server"),
        ({"a b": {"url": "https://a.example.com"}, "a_b": {"url": ""}}, "tool prefix 'a_b'"),
    ],
)
def test_a_bad_declaration_is_an_error_naming_the_file_and_line(
    plugin_dir: Path, agents: Any, said: str
) -> None:
    if isinstance(agents, list):
        (plugin_dir / ".a2a.json").write_text(json.dumps(agents))
    else:
        _agents(plugin_dir, agents)
    error = _error(plugin_dir)
    assert error.file == ".a2a.json" and said in error.message, error.message
    assert error.line is not None


def test_the_runtime_offers_each_agent_within_the_egress_list(plugin_dir: Path) -> None:
    _agents(plugin_dir, {"review": {"url": "https://agents.example.com/a2a", "description": "d"}})
    plugin = read_plugin(plugin_dir)
    agent = agent_from_plugin(plugin_dir, plugin, model="scripted:a2a")
    [remote] = agent.a2a_agents
    assert (remote.name, remote.prefix, remote.url) == (
        "review",
        "review",
        plugin.a2a_agents[0].url,
    )
    assert agent.describe()["a2a_agents"] == [remote.describe()]
    # A deployment's URL replaces the plugin's; one outside the egress list is refused.
    moved = agent_from_plugin(
        plugin_dir,
        plugin,
        model="scripted:a2a",
        tool_overrides={"review": {"url": "https://agents.example.com/other"}},
    )
    assert moved.a2a_agents[0].url == "https://agents.example.com/other"
    assert moved.digest != agent.digest
    with pytest.raises(
        PluginError, match=r"A2A agent .review. at evil\.example is not in the egress"
    ):
        agent_from_plugin(
            plugin_dir, plugin, tool_overrides={"review": {"url": "https://evil.example/a2a"}}
        )
    # Without agents the definition describes none (digests of existing agents stay).
    (plugin_dir / ".a2a.json").unlink()
    assert "a2a_agents" not in agent_from_plugin(plugin_dir, read_plugin(plugin_dir)).describe()


async def test_a_deployment_names_an_agent_as_it_names_an_mcp_server(
    plugin_dir: Path, tmp_path: Path
) -> None:
    _agents(plugin_dir, {"review": {"url": "https://agents.example.com/a2a"}})
    async with await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path) as store:
        registry = Registry(store)
        await registry.publish_dir(plugin_dir)
        await registry.release("writer", "stable", "1.2.0")

        async def deploy(**spec: Any) -> Any:
            body = {"plugin": "writer", "model": "scripted:a2a", **spec}
            return await registry.deploy("w", DeploymentSpec.model_validate(body))

        saved = await deploy(
            tools={"review": {"url": "https://agents.example.com/v2"}},
            credentials=[{"server": "review", "secret": "review-token"}],
        )
        assert saved.name == "w" and saved.spec["credentials"][0]["server"] == "review"
        refusals = {
            "invalid_deployment": {"tools": {"review": {"command": "python3"}}},
            "egress_denied": {"tools": {"review": {"url": "https://evil.example/a2a"}}},
        }
        for code, spec in refusals.items():
            with pytest.raises(Refused) as info:
                await deploy(**spec)
            assert info.value.code == code, info.value.detail
        with pytest.raises(Refused, match="not an MCP server or A2A agent"):
            await deploy(tools={"nobody": {"url": "https://agents.example.com/x"}})
