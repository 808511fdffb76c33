"""Slash commands: `commands/*.md` read as Claude Code writes them, `/name args` expanded
into the turn's prompt by the runtime (its `allowed-tools` narrowing the turn's tools, its
`model` the turn's model), refused by the Host when the deployment has no such command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.models import ModelRequestParameters

from opennua.host import DeploymentSpec, Hub, SessionHost
from opennua.plugins import PluginError, parse_invocation, read_plugin
from opennua.protocol import CreateSession, SendMessage
from opennua.runtime import (
    Completed,
    UnknownCommand,
    agent_from_plugin,
    default_agent,
    invoke_command,
)
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, say
from opennua.store import open_store
from opennua.supervisor._snapshot import agent_for
from tests.runtime.helpers import drive, make_loop

REVIEW = """---
description: Review a pull request
argument-hint: [pr-number] [focus]
allowed-tools: Bash(git diff:*), Bash(gh pr view:*), Read
model: test:reviewer
---
Review pull request #$1, focusing on $2.

All arguments: $ARGUMENTS
"""
FIXUP = "# Fix up the last commit\n\nAmend it with what is staged.\n"
DEPLOY = """---
description: Deploy
---
!`git status`
Deploy $ARGUMENTS.
"""


def _plugin(tmp_path: Path, **manifest: Any) -> Path:
    root = tmp_path / "reviewer"
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin/plugin.json").write_text(
        json.dumps({"name": "reviewer", "version": "1.0.0", "description": "Reviews.", **manifest})
    )
    (root / "commands/git").mkdir(parents=True)
    (root / "commands/review-pr.md").write_text(REVIEW)
    (root / "commands/git/fixup.md").write_text(FIXUP)
    (root / "extra").mkdir()
    (root / "extra/deploy.md").write_text(DEPLOY)
    return root


def test_commands_read_as_claude_code_writes_them(tmp_path: Path) -> None:
    plugin = read_plugin(_plugin(tmp_path, commands=["./extra/deploy.md"]))
    assert [(c.name, c.path) for c in plugin.commands] == [
        ("fixup", "commands/git/fixup.md"),  # a subfolder groups, it does not name
        ("review-pr", "commands/review-pr.md"),
        ("deploy", "extra/deploy.md"),  # the manifest's `commands` path
    ]
    review = plugin.command("review-pr")
    assert review is not None and plugin.command("reviewer:review-pr") == review
    assert review.description == "Review a pull request"
    assert review.argument_hint == "[pr-number] [focus]"
    assert review.allowed_tools == ("Bash(git diff:*)", "Bash(gh pr view:*)", "Read")
    assert review.model == "test:reviewer"
    fixup = plugin.command("fixup")
    assert fixup is not None and fixup.description == "Fix up the last commit"
    assert [(p.severity, p.where) for p in plugin.problems] == [
        ("warning", "commands/review-pr.md:2"),  # argument-hint is no strict YAML
        ("ignored", "extra/deploy.md:4"),  # the !`git status` line
    ]


def test_a_command_that_is_not_utf8_refuses_the_plugin(tmp_path: Path) -> None:
    root = _plugin(tmp_path)
    (root / "commands/bad.md").write_bytes(b"\xff\xfe")
    with pytest.raises(PluginError) as caught:
        read_plugin(root)
    assert caught.value.file == "commands/bad.md"


def test_arguments_expand_as_in_claude_code(tmp_path: Path) -> None:
    plugin = read_plugin(_plugin(tmp_path))
    review, fixup = plugin.command("review-pr"), plugin.command("fixup")
    assert review is not None and fixup is not None
    assert review.expand("123 security") == (
        "Review pull request #123, focusing on security.\n\nAll arguments: 123 security"
    )
    assert review.expand("") == "Review pull request #, focusing on .\n\nAll arguments:"
    # A body without $ARGUMENTS gets them appended.
    assert fixup.expand("quickly") == (
        "# Fix up the last commit\n\nAmend it with what is staged.\n\nARGUMENTS: quickly"
    )


@pytest.mark.parametrize(
    ("text", "invoked"),
    [
        ("/review-pr 123 security", ("review-pr", "123 security")),
        ("/review-pr", ("review-pr", "")),
        ("/reviewer:review-pr 1", ("reviewer:review-pr", "1")),
        ("/etc/hosts is broken", None),  # a path, not a command
        ("//review-pr", None),  # escaped: the text "/review-pr"
        ("review /review-pr", None),
        ("/", None),
    ],
)
def test_an_invocation_is_a_slash_and_a_name_at_the_start(
    text: str, invoked: tuple[str, str] | None
) -> None:
    assert parse_invocation(text) == invoked


def test_invoke_narrows_tools_and_picks_the_model_and_refuses_unknown_names(
    tmp_path: Path,
) -> None:
    root = _plugin(tmp_path)
    agent = agent_from_plugin(root, read_plugin(root), model="test:default")
    same, text = invoke_command(agent, "just a message")
    assert (same, text) == (agent, "just a message")
    assert invoke_command(agent, "//review-pr is a command")[1] == "/review-pr is a command"
    narrowed, prompt = invoke_command(agent, "/review-pr 7 tests")
    assert prompt.startswith("Review pull request #7, focusing on tests.")
    assert narrowed.allowed_tools == ("shell", "read_file")
    assert narrowed.model == "test:reviewer"
    fixup, _ = invoke_command(agent, "/reviewer:fixup")
    assert fixup.allowed_tools is None and fixup.model == "test:default"
    with pytest.raises(UnknownCommand) as caught:
        invoke_command(agent, "/nope 1")
    assert caught.value.code == "unknown_command"
    assert str(caught.value) == (
        "no command /nope in this deployment (its commands: /fixup, /review-pr); "
        "start a message with // to send text that begins with /"
    )


async def test_the_model_gets_the_expansion_and_only_the_commands_tools(
    tmp_path: Path,
) -> None:
    requests: list[tuple[list[ModelMessage], ModelRequestParameters]] = []

    model = ScriptedModel([say("reviewed")])
    original = model.request_stream

    def stream(messages: Any, settings: Any, params: Any, run_context: Any = None) -> Any:
        requests.append((list(messages), params))
        return original(messages, settings, params, run_context)

    model.request_stream = stream  # type: ignore[method-assign]
    root = _plugin(tmp_path)
    workdir = tmp_path / "ws"
    workdir.mkdir()
    agent, prompt = invoke_command(
        agent_from_plugin(root, read_plugin(root), model="test:default"), "/review-pr 9 docs"
    )
    outcome, _, _ = await drive(
        lambda j: make_loop(agent, j, workdir, model), InMemoryJournal(), prompt
    )
    assert isinstance(outcome, Completed)
    ((messages, params),) = requests
    first = messages[0]
    assert isinstance(first, ModelRequest) and isinstance(first.parts[0], UserPromptPart)
    assert first.parts[0].content == (
        "Review pull request #9, focusing on docs.\n\nAll arguments: 9 docs"
    )
    assert sorted(t.name for t in params.function_tools) == ["read_file", "shell"]


async def test_the_host_refuses_an_unknown_command_and_keeps_the_users_text(
    tmp_path: Path,
) -> None:
    async with await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path) as store:
        host = SessionHost(store, Hub(store))
        await host.registry.ensure_builtin("scripted:demo")
        published = (await host.registry.publish_dir(_plugin(tmp_path))).version
        await host.registry.release(published.name, "stable", published.version)
        await host.registry.deploy(
            "review", DeploymentSpec(plugin=published.name, model="test:default")
        )
        created = await host.submit(
            None, CreateSession(intent_id="int_1", client_id="cli_t", deployment="review")
        )
        sid = created.ids["session_id"]  # type: ignore[union-attr]

        def message(intent_id: str, text: str) -> SendMessage:
            return SendMessage(
                intent_id=intent_id, client_id="cli_t", content=[{"type": "text", "text": text}]
            )

        refused = await host.submit(sid, message("int_2", "/nope 1"))
        assert refused.type == "rejected"
        assert refused.code == "unknown_command"  # type: ignore[union-attr]
        assert "(its commands: /fixup, /review-pr)" in refused.message  # type: ignore[union-attr]
        assert await store.list_executions(sid) == []

        sent = await host.submit(sid, message("int_3", "/review-pr 42 naming"))
        assert sent.type == "accepted"
        (execution,) = await store.list_executions(sid)
        # The session shows what the user typed; the runtime expands it.
        assert execution.input == [{"type": "text", "text": "/review-pr 42 naming"}]
        _, state = await host.snapshot(sid)
        (turn,) = state["turns"]
        user = turn["messages"][turn["user_message_id"]]
        assert (user["role"], user["text"]) == ("user", "/review-pr 42 naming")
        bound = await agent_for(store, default_agent(), execution, tmp_path / "plugins")
        agent, prompt = invoke_command(bound.agent, "/review-pr 42 naming")
        assert prompt.startswith("Review pull request #42, focusing on naming.")
        assert agent.model == "test:reviewer"
