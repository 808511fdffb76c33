"""Tools: the decorator, workspace confinement, shell hygiene, validation retries, big outputs."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import os
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

from opennua.runtime import (
    Completed,
    Sandbox,
    Stopped,
    ToolContext,
    ToolError,
    default_agent,
    tool,
)
from opennua.runtime._builtins import edit_file, list_files, read_file, shell, write_file
from opennua.runtime._files import confine
from opennua.runtime._tools import MemoryArtifacts
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, ScriptStep, call, say
from tests.runtime.helpers import drive, make_loop


def _ctx(workdir: Path, **kw: object) -> ToolContext:
    return ToolContext(
        workdir=workdir,
        run_id="run_x",
        tool_call_id="call_x",
        idempotency_key="call_x",
        artifacts=MemoryArtifacts(),
        cancel=asyncio.Event(),
        **kw,  # type: ignore[arg-type]
    )


def test_tool_decorator_schema_and_flags() -> None:
    @tool("charge", kind="execute", title="Charge card", requires_approval=True, idempotent=True)
    def charge(ctx: ToolContext, amount: int, currency: str = "EUR") -> str:
        """Charge the card."""
        return f"{amount} {currency}"

    assert (charge.name, charge.kind, charge.title) == ("charge", "execute", "Charge card")
    assert charge.requires_approval and charge.idempotent and charge.takes_context
    schema = charge.parameters_schema
    assert schema["required"] == ["amount"]
    assert set(schema["properties"]) == {"amount", "currency"}  # ctx is not an argument
    assert charge.description == "Charge the card."
    assert charge.validate('{"amount": 3}') == {"amount": 3, "currency": "EUR"}
    with pytest.raises(ValueError):
        charge.validate('{"amount": "lots"}')
    with pytest.raises(ValueError):
        charge.validate('{"amount": 1, "extra": 2}')


def test_arguments_are_read_as_the_standard_library_reads_them() -> None:
    # orjson reads them fast; an integer past 64 bits stays exact (orjson alone would make
    # it a float) and text that is not JSON is still a ValueError the loop reports.
    @tool("count")
    def count(ctx: ToolContext, n: int, label: str = "") -> str:
        return str(n)

    assert count.validate('{"n": 1180591620717411303424, "label": "\\u00e9"}') == {
        "n": 2**70,
        "label": "\u00e9",
    }
    with pytest.raises(ValueError):
        count.validate('{"n": ')


def test_a_tool_schema_is_built_once_and_a_provider_transform_leaves_it_as_it_was() -> None:
    @tool("book")
    def book(ctx: ToolContext, title: str, nights: int | None = None) -> str:
        """Book a room."""
        return title

    schema = book.parameters_schema
    assert book.parameters_schema is schema  # shared: every model request offers it
    before = copy.deepcopy(schema)
    OpenAIJsonSchemaTransformer(schema, strict=True).walk()  # what a request to OpenAI does
    assert schema == before


@pytest.mark.parametrize("bad", ["../escape.txt", "/etc/passwd", "a/../../b", "link/secret"])
async def test_paths_are_confined_to_the_workspace(tmp_path: Path, bad: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s3cret")
    (ws / "link").symlink_to(outside)
    with pytest.raises(ToolError, match=r"workspace|absolute"):
        confine(ws, bad)
    with pytest.raises(ToolError):
        await read_file.fn(_ctx(ws), bad)
    with pytest.raises(ToolError):
        await write_file.fn(_ctx(ws), bad, "x")


async def test_file_tools_report_changes(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    await write_file.fn(ctx, "a/b.txt", "hello world")
    await edit_file.fn(ctx, "a/b.txt", "world", "there")
    assert await read_file.fn(ctx, "a/b.txt") == "hello there"
    assert await list_files.fn(ctx, ".") == "a/\na/b.txt"
    assert [(c.path, c.change) for c in ctx.reported] == [  # type: ignore[attr-defined]
        ("a/b.txt", "created"),
        ("a/b.txt", "modified"),
    ]
    with pytest.raises(ToolError, match="occurs 0 times"):
        await edit_file.fn(ctx, "a/b.txt", "absent", "x")


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
async def test_shell_runs_in_workspace_with_a_scrubbed_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    (tmp_path / "here.txt").write_text("x")
    out = await shell.fn(_ctx(tmp_path, sandbox=Sandbox(sandbox)), "ls; pwd; env")  # type: ignore[arg-type]
    lines = out.splitlines()
    assert lines[0] == "here.txt"  # cwd is the workspace
    # Under bubblewrap the workspace is /workspace: the host path is nobody's business.
    assert lines[1] == ("/workspace" if sandbox == "bwrap" else str(tmp_path))
    assert "sk-secret" not in out
    assert {line.split("=", 1)[0] for line in lines[2:]} <= {
        "PATH",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
        "TZ",
        "TERM",
        "HOME",
        "PWD",
        "SHLVL",
        "_",
    }


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
async def test_shell_timeout_and_output_cap(tmp_path: Path, sandbox: str) -> None:
    ctx = _ctx(tmp_path, sandbox=Sandbox(sandbox))  # type: ignore[arg-type]
    with pytest.raises(ToolError, match="timed out"):
        await shell.fn(ctx, "sleep 5", timeout_seconds=0.2)
    out = await shell.fn(ctx, "head -c 200000 /dev/zero | tr '\\0' a")
    assert out.endswith("[output truncated]") and len(out) < 70_000
    with pytest.raises(ToolError, match="exit status 3"):
        await shell.fn(ctx, "exit 3")


async def test_invalid_arguments_go_back_as_a_bounded_retry(tmp_path: Path) -> None:
    agent = default_agent("scripted:test")
    model = ScriptedModel(
        [
            ScriptStep(calls=(call("write_file", path="a.txt"),)),  # content missing
            ScriptStep(calls=(call("nope"),)),  # unknown tool
            ScriptStep(calls=(call("write_file", path="a.txt", content="ok"),)),
            say("fixed"),
        ]
    )
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, tmp_path, model), InMemoryJournal(), "x"
    )
    assert isinstance(outcome, Completed)
    failed = [
        e.data
        for e in journal.log
        if e.type == "tool_call.updated" and e.data.status == "failed"  # type: ignore[attr-defined]
    ]
    assert [f.error.code for f in failed] == ["invalid_arguments", "invalid_arguments"]  # type: ignore[attr-defined]
    assert "content" in failed[0].error.message  # type: ignore[attr-defined]
    # The model saw the error as the call's result and could fix it.
    loop = make_loop(agent, journal.restarted(), tmp_path, model)
    await loop.run("x")
    retried = [
        p
        for m in loop.state.runs[journal.log[0].run_id].messages
        for p in m.parts
        if getattr(p, "outcome", None) == "retried"
    ]
    assert len(retried) == 2

    always_bad = ScriptedModel(lambda messages: ScriptStep(calls=(call("write_file"),)))
    outcome, _, _ = await drive(
        lambda j: make_loop(agent, j, tmp_path, always_bad), InMemoryJournal(), "x"
    )
    assert isinstance(outcome, Stopped) and outcome.stop_reason == "failed"
    assert outcome.error is not None and outcome.error.code == "tool_retries_exhausted"


async def test_large_output_goes_by_reference(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * 20_000)
    artifacts = MemoryArtifacts()
    agent = default_agent("scripted:test")
    model = ScriptedModel([ScriptStep(calls=(call("read_file", path="big.txt"),)), say("ok")])
    _, journal, _ = await drive(
        lambda j: make_loop(agent, j, tmp_path, model, artifacts=artifacts), InMemoryJournal(), "x"
    )
    result = [e.data for e in journal.log if e.type == "tool_call.updated"][-1]
    assert result.output_ref is not None and result.output_ref.startswith("sha256:")  # type: ignore[attr-defined]
    assert len(result.output) <= 8192  # type: ignore[attr-defined, arg-type]
    assert artifacts.blobs[result.output_ref.removeprefix("sha256:")] == b"x" * 20_000  # type: ignore[attr-defined]


async def test_ask_user_suspends_and_returns_the_answer(tmp_path: Path) -> None:
    agent = default_agent("scripted:test")
    model = ScriptedModel(
        [
            ScriptStep(
                calls=(
                    call(
                        "ask_user",
                        question="What is the answer?",
                        response_schema={"type": "string"},
                    ),
                )
            ),
            say("thanks"),
        ]
    )
    outcome, journal, history = await drive(
        lambda j: make_loop(agent, j, tmp_path, model), InMemoryJournal(), "x"
    )
    assert isinstance(outcome, Completed) and len(history) == 2
    opened = next(e.data for e in journal.log if e.type == "input_request.opened")
    assert opened.reason == "input_required" and opened.response_schema == {"type": "string"}  # type: ignore[attr-defined]
    result = [e.data for e in journal.log if e.type == "tool_call.updated"][-1]
    assert result.output == "forty-two"  # type: ignore[attr-defined]


async def test_rejected_approval_ends_the_call_rejected_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    agent = default_agent("scripted:test")
    seen: list[str] = []

    def script(messages: list[ModelMessage]) -> ScriptStep:
        # The model is told: its second request carries the rejection as the call's result.
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ScriptStep(calls=(call("shell", command="touch ran"),))
        seen.append(str(messages[-1].parts[0].content))
        return say("understood")

    model = ScriptedModel(script)
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, tmp_path, model),
        InMemoryJournal(),
        "x",
        {"tool_call": "reject_once"},
    )
    assert isinstance(outcome, Completed) and outcome.output == "understood"
    assert not (tmp_path / "ran").exists()
    result = [e.data for e in journal.log if e.type == "tool_call.updated"][-1]
    assert result.status == "rejected" and result.error.code == "rejected"  # type: ignore[attr-defined]
    assert "rejected" in seen[-1]
    # It never started, so the ledger has no entry for it (nothing may be reconciled later).
    assert journal.ledger == {}


def test_env_has_no_process_secrets() -> None:
    from opennua.runtime._builtins import scrubbed_env

    env = scrubbed_env({"PATH": "/bin", "AWS_SECRET_ACCESS_KEY": "x", "LANG": "C"})
    assert env == {"PATH": "/bin", "LANG": "C"}
    assert dataclasses.is_dataclass(_ctx(Path(os.getcwd())))
