"""Limits, cooperative cancellation, and checkpoint growth."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from opennua.runtime import (
    Completed,
    Limits,
    Sandbox,
    SandboxMode,
    Stopped,
    ToolContext,
    default_agent,
    tool,
)
from opennua.runtime._builtins import BUILTIN_TOOLS
from opennua.runtime._checkpoint import decode
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, ScriptStep, call
from tests.runtime.helpers import ROOT_RUN, drive, make_loop, processes_running


def _forever() -> ScriptedModel:
    return ScriptedModel(lambda m: ScriptStep(calls=(call("list_files"),)))


def _chatty() -> ScriptedModel:
    """Text and a call at every step: each response is a message."""
    return ScriptedModel(lambda m: ScriptStep(text="Looking.", calls=(call("list_files"),)))


async def test_max_steps_ends_consistently(tmp_path: Path) -> None:
    agent = default_agent("scripted:test")
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, tmp_path, _chatty(), limits=Limits(max_steps=3)),
        InMemoryJournal(),
        "x",
    )
    assert isinstance(outcome, Stopped) and outcome.stop_reason == "max_steps"
    started = [e for e in journal.log if e.type == "message.started"]
    completed = [e for e in journal.log if e.type == "message.completed"]
    assert len(started) == len(completed) == 3  # no message left open


async def test_max_tokens(tmp_path: Path) -> None:
    agent = default_agent("scripted:test")
    outcome, _, _ = await drive(
        lambda j: make_loop(agent, j, tmp_path, _forever(), limits=Limits(max_tokens=300)),
        InMemoryJournal(),
        "x",
    )
    assert isinstance(outcome, Stopped) and outcome.stop_reason == "failed"
    assert outcome.error is not None and outcome.error.code == "max_tokens"


@pytest.mark.parametrize("sandbox", ["bwrap", "landlock", "none"])
async def test_cancel_kills_the_tool_subprocess_and_ends_consistently(
    tmp_path: Path, sandbox: SandboxMode
) -> None:
    agent = dataclasses.replace(
        default_agent("scripted:test"),
        tools=tuple(
            dataclasses.replace(t, requires_approval=False) if t.name == "shell" else t
            for t in BUILTIN_TOOLS
        ),
    )
    command = "(sleep 30.417; touch late) & echo started > started; sleep 30.416; touch finished"
    model = ScriptedModel([ScriptStep(calls=(call("shell", command=command),))])
    cancel = asyncio.Event()
    journal = InMemoryJournal()
    loop = make_loop(agent, journal, tmp_path, model, env={"sandbox": Sandbox(sandbox)})
    task = asyncio.create_task(loop.run("x", cancel=cancel))
    for _ in range(500):
        if (tmp_path / "started").exists() and processes_running("sleep 30.416"):
            break
        await asyncio.sleep(0.01)
    assert processes_running("sleep 30.41")
    cancel.set()
    outcome = await asyncio.wait_for(task, 5)
    assert isinstance(outcome, Stopped) and outcome.stop_reason == "cancelled"
    # The whole tree is gone once the loop returns: the command and what it put behind it.
    assert processes_running("sleep 30.41") == []
    assert not (tmp_path / "finished").exists()
    last = [e.data for e in journal.log if e.type == "tool_call.updated"][-1]
    # It may have had partial effects: shown `unknown`, as its ledger entry says.
    assert last.status == "unknown"  # type: ignore[attr-defined]
    assert list(journal.ledger.values()) == ["unknown"]
    assert all(r.status == "cancelled" for r in loop.state.runs.values())


async def test_checkpoint_steps_grow_linearly_with_compaction(tmp_path: Path) -> None:
    @tool("emit", idempotent=True)
    def emit(ctx: ToolContext, i: int) -> str:
        return f"payload {i} " + "p" * 300

    agent = dataclasses.replace(default_agent("scripted:test"), tools=(emit,))

    def script(messages: list) -> ScriptStep:  # type: ignore[type-arg]
        n = sum(1 for m in messages if m.kind == "response")
        return ScriptStep(calls=(call("emit", i=n),))

    sizes = {}
    for steps in (100, 400):
        journal = InMemoryJournal()
        limits = Limits(max_steps=steps, compact_min_bytes=16 * 1024)
        outcome, journal, _ = await drive(
            lambda j, limits=limits: make_loop(
                agent, j, tmp_path, ScriptedModel(script), limits=limits
            ),
            journal,
            "x",
        )
        assert isinstance(outcome, Stopped) and outcome.stop_reason == "max_steps"
        payload_bytes = journal._d.bytes_written
        sizes[steps] = (journal.stored_bytes, payload_bytes, journal.commits)
        # Resume from the compacted checkpoint rebuilds the same history.
        stored = await journal.restarted().load()
        assert stored is not None and stored.full is not None
        state = decode(
            stored.full, stored.steps, snapshot_digest=agent.digest, root_run_id=ROOT_RUN
        )
        assert state.runs[journal.log[0].run_id].step == steps
    (s100, w100, _), (s400, w400, c400) = sizes[100], sizes[400]
    assert c400 <= 2 * 400 + 2  # one commit per model response and one per tool result
    # Stored and written bytes grow linearly (x4 steps → about x4 bytes, not x16).
    assert s400 < 5 * s100 and w400 < 6 * w100, sizes


async def test_completed_usage_is_rolled_up(tmp_path: Path) -> None:
    agent = default_agent("scripted:test")
    model = ScriptedModel([ScriptStep(text="hi")])
    outcome, _, _ = await drive(
        lambda j: make_loop(agent, j, tmp_path, model), InMemoryJournal(), "x"
    )
    assert isinstance(outcome, Completed) and outcome.usage["input_tokens"] > 0


async def test_cancel_inside_a_subagent_ends_its_task_call_too(tmp_path: Path) -> None:
    # The parent's `task` call was skipped when the turn stopped: `nua show` kept
    # "◐ Run sub-agent … [in_progress]" under a cancelled turn (issue 35).
    began = asyncio.Event()

    @tool("wait_forever")
    async def wait_forever(ctx: ToolContext) -> str:
        began.set()
        await asyncio.sleep(3600)
        return "never"

    agent = dataclasses.replace(
        default_agent("scripted:test"), tools=(*BUILTIN_TOOLS, wait_forever)
    )
    model = ScriptedModel(
        [ScriptStep(calls=(call("task", name="helper", task="wait"),))],
        workers={"wait": [ScriptStep(calls=(call("wait_forever"),))]},
    )
    cancel = asyncio.Event()
    journal = InMemoryJournal()
    task = asyncio.create_task(make_loop(agent, journal, tmp_path, model).run("x", cancel=cancel))
    await asyncio.wait_for(began.wait(), 5)
    cancel.set()
    outcome = await asyncio.wait_for(task, 5)
    assert isinstance(outcome, Stopped) and outcome.stop_reason == "cancelled"
    status: dict[str, str] = {}
    for e in journal.log:
        if e.type in ("tool_call.started", "tool_call.updated"):
            status[e.data.tool_call_id] = getattr(e.data, "status", "pending")  # type: ignore[attr-defined]
    names = {e.data.tool_call_id: e.data.name for e in journal.log if e.type == "tool_call.started"}  # type: ignore[attr-defined]
    assert {names[c]: s for c, s in status.items()} == {
        "task": "cancelled",
        "wait_forever": "unknown",  # it was running: it may have taken effect
    }
    ended = [e.data.status for e in journal.log if e.type == "worker.ended"]  # type: ignore[attr-defined]
    assert ended == ["cancelled"]
