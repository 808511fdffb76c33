"""Plugins as people publish them (issue 30): what Claude Code accepts reads, with a warning
where opennua reads it differently and `ignored` for what it does not run; every problem is
reported at once, each with its severity and location."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from opennua.plugins import (
    McpServerSpec,
    PluginError,
    Problem,
    read_marketplace,
    read_plugin,
    tool_prefix,
)
from opennua.runtime import agent_from_plugin

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def published(tmp_path: Path) -> Path:
    dest = tmp_path / "as-published"
    shutil.copytree(FIXTURES / "as_published", dest)
    return dest


def _found(problems: tuple[Problem, ...], severity: str, text: str) -> Problem:
    matches = [p for p in problems if p.severity == severity and text in p.message]
    assert len(matches) == 1, (severity, text, [str(p) for p in problems])
    return matches[0]


def test_the_shapes_claude_code_accepts_read_with_warnings(published: Path) -> None:
    plugin = read_plugin(published)
    # No version: one derived from the content, so the same bytes are the same version.
    assert plugin.version == "0.0.0+" + plugin.digest.removeprefix("sha256:")[:12]
    problems = plugin.problems
    assert all(p.severity in ("warning", "ignored") for p in problems)
    # The skill is named by its front matter, as Claude Code names it.
    assert [s.name for s in plugin.skills] == ["calendar-sdk", "digest"]
    assert _found(problems, "warning", "differs from its folder").where == (
        "skills/cal-sdk/SKILL.md:2"
    )
    # An unquoted ": " in a value: read line by line, with a warning on its line.
    digest = plugin.skill("digest")
    assert digest is not None
    assert digest.description == "Use this when: the user asks for a digest of the day"
    assert _found(problems, "warning", "not strict YAML").where == "skills/digest/SKILL.md:3"
    # A description over 1,024 characters is kept whole, and said.
    briefer = plugin.agent("briefer")
    assert briefer is not None and len(briefer.description) > 1024
    assert _found(problems, "warning", "over the 1024").file == "agents/briefer.md"
    # Claude Code tools opennua does not have: each named, none dropped silently.
    for tool in ("NotebookEdit", "WebSearch"):
        _found(problems, "warning", f"tool {tool} is not supported")
    # A permission rule stands for its whole tool (no per-argument rule), as said.
    _found(problems, "warning", "tool rule Bash(git:*) is read as Bash")
    for tool in ("Read", "Grep", "WebFetch"):  # mapped (Grep, WebFetch: built-ins)
        assert not any(f"tool {tool} " in p.message for p in problems)
    # Keys and components opennua does not use: `ignored`, with the reason.
    assert (
        _found(problems, "ignored", "'outputStyles': output").where
        == ".claude-plugin/plugin.json:5"
    )
    assert "not a key opennua reads" in _found(problems, "ignored", "'userConfig'").message
    _found(problems, "ignored", "'color'")
    _found(problems, "ignored", "'maxTurns'")
    _found(problems, "ignored", "'user-invocable'")
    assert [p.where for p in problems if p.message.startswith("output styles")] == [
        "output-styles/"
    ]


def test_mcp_json_without_the_wrapper_and_server_names_as_written(published: Path) -> None:
    plugin = read_plugin(published)
    servers = {s.name: s for s in plugin.mcp_servers}
    assert list(servers) == ["google calendar", "google_calendar", "paypal", "docs"]
    # A name that is a prefix keeps it; a derived one yields to it.
    assert servers["google_calendar"].prefix == "google_calendar"
    assert servers["google calendar"].prefix == "google_calendar_2"
    assert (servers["paypal"].transport, servers["docs"].transport) == ("sse", "http")
    # "url": "" is a placeholder: valid, not configured, and said.
    assert not servers["google calendar"].configured
    assert plugin.servers_to_configure() == (servers["google calendar"],)
    assert all(s.configured for n, s in servers.items() if n != "google calendar")
    warning = _found(plugin.problems, "warning", "has no URL; a deployment must supply one")
    assert warning.where == ".mcp.json:2"
    # The wrapped form reads the same servers.
    (published / ".mcp.json").write_text(
        json.dumps({"mcpServers": json.loads((published / ".mcp.json").read_text())})
    )
    assert read_plugin(published).mcp_servers == plugin.mcp_servers


@pytest.mark.parametrize(
    ("name", "prefix"),
    [
        ("notes", "notes"),
        ("Google_Drive", "Google_Drive"),  # existing names keep their tools' names
        ("google calendar", "google_calendar"),
        ("a__b", "a_b"),
        ("Zoom Docs (beta)!", "Zoom_Docs_beta"),
        ("???", "server"),
    ],
)
def test_a_tool_prefix_is_letters_digits_dash_and_single_underscores(
    name: str, prefix: str
) -> None:
    assert tool_prefix(name) == prefix
    assert McpServerSpec(name=name, url="").prefix == prefix


def test_the_runtime_names_tools_by_the_prefix(published: Path) -> None:
    plugin = read_plugin(published)
    # The placeholder runs once a deployment gives it a URL (without one it is left out).
    assert "google calendar" not in {
        s.name for s in agent_from_plugin(published, plugin).mcp_servers
    }
    given = {"google calendar": {"url": "https://calendar.example.org/mcp"}}
    agent = agent_from_plugin(published, plugin, tool_overrides=given)
    by_name = {s.name: s for s in agent.mcp_servers}
    assert by_name["google calendar"].prefix == "google_calendar_2"
    # A server whose prefix is its name describes as before: its definition's digest holds.
    assert by_name["docs"].describe()["prefix"] is True
    assert by_name["google calendar"].describe()["prefix"] == "google_calendar_2"
    (briefer,) = agent.subagents
    # `mcp__<name as written>__tool` reaches the model as `<prefix>__tool`.
    assert briefer.tools is not None
    assert "google_calendar_2__list_events" in briefer.tools
    assert "read_file" in briefer.tools
    # A permission rule is its whole tool, as for commands.
    (published / "agents" / "git.md").write_text(
        "---\nname: git\ndescription: Git.\ntools: Bash(git log:*), Read\n---\nx\n"
    )
    git = agent_from_plugin(published, read_plugin(published)).subagent("git")
    assert git is not None and git.tools == ("shell", "read_file")


def test_every_problem_is_reported_at_once(published: Path) -> None:
    (published / ".mcp.json").write_text(
        '{\n "ws": {"type": "websocket", "url": "wss://x"},\n "bad": {"command": 3},\n'
        ' "ok": {"command": "x"}\n}'
    )
    (published / "agents" / "second.md").write_text("no front matter\n")
    (published / "skills" / "broken").mkdir()
    (published / "skills" / "broken" / "notes.md").write_text("x")
    with pytest.raises(PluginError) as info:
        read_plugin(published)
    errors = [str(p) for p in info.value.problems if p.severity == "error"]
    assert errors == [
        "skills/broken/SKILL.md: error: a skill folder needs a SKILL.md",
        "agents/second.md:1: error: missing YAML front matter (the file must start with ---)",
        ".mcp.json:2: error: server 'ws': type 'websocket' is not one of stdio, http, sse",
        ".mcp.json:3: error: server 'bad': command must be a string",
    ]
    # The warnings and ignored features come with them, so one pass fixes everything.
    assert any(p.severity == "warning" for p in info.value.problems)
    assert any(p.severity == "ignored" for p in info.value.problems)
    assert str(info.value) == errors[0].replace(": error:", ":", 1)


def test_a_server_type_must_match_what_it_has(published: Path) -> None:
    cases = {
        '{"s": {"type": "stdio", "url": "https://x"}}': "a stdio server needs a command",
        '{"s": {"type": "sse", "command": "x"}}': "an sse server needs a url",
        '{"s": {"url": "ftp://x"}}': "url must be an http(s) URL",
        '{"mcpServers": [1]}': '"mcpServers" must be an object',
    }
    for text, message in cases.items():
        (published / ".mcp.json").write_text(text)
        with pytest.raises(PluginError) as info:
            read_plugin(published)
        assert message in info.value.message, text
    (published / ".mcp.json").write_text('{"s": {"url": "${API_URL}/mcp"}}')
    assert read_plugin(published).mcp_servers[0].url == "${API_URL}/mcp"  # the deployment's


def test_unsupported_tools_are_reported_once_per_name(published: Path) -> None:
    for n in range(3):
        (published / "agents" / f"a{n}.md").write_text(
            f"---\nname: a{n}\ndescription: d\ntools: NotebookEdit\n---\nx\n"
        )
    warning = _found(read_plugin(published).problems, "warning", "tool NotebookEdit")
    assert warning.message.endswith("(and 3 more files)") and warning.file == "agents/a0.md"


def test_a_marketplace_lists_local_plugins_and_skips_remote_ones() -> None:
    entries = read_marketplace(FIXTURES / "marketplace")
    assert [e.name for e in entries] == ["notes", "bare", "broken", "remote", "subdir"]
    by_name = {e.name: e for e in entries}
    assert by_name["notes"].path == (FIXTURES / "marketplace" / "plugins" / "notes").resolve()
    assert by_name["bare"].version == "2.0.0"
    assert by_name["remote"].path is None
    assert "github source example/remote-plugin is not fetched" in (by_name["remote"].skipped or "")
    assert "git-subdir source https://git.example.com/x.git" in (by_name["subdir"].skipped or "")


def test_a_marketplace_source_may_not_leave_it(tmp_path: Path) -> None:
    (tmp_path / "m" / ".claude-plugin").mkdir(parents=True)
    (tmp_path / "m" / ".claude-plugin" / "marketplace.json").write_text(
        '{"plugins": [{"name": "x", "source": "../elsewhere"}]}'
    )
    with pytest.raises(PluginError, match="leaves the marketplace"):
        read_marketplace(tmp_path / "m")
    with pytest.raises(PluginError, match="no marketplace"):
        read_marketplace(tmp_path)
