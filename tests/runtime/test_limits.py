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


async def _grow(
    tmp_path: Path, agent: object, script: object, steps: int
) -> tuple[InMemoryJournal, object]:
    """Run `steps` model responses with fulls due from 16 KiB on; the journal and the state
    a resume rebuilds from what it stored."""
    limits = Limits(max_steps=steps, compact_min_bytes=16 * 1024)
    outcome, journal, _ = await drive(
        lambda j, limits=limits: make_loop(
            agent, j, tmp_path, ScriptedModel(script), limits=limits
        ),
        InMemoryJournal(),
        "x",
    )
    assert isinstance(outcome, Stopped) and outcome.stop_reason == "max_steps"
    stored = await journal.restarted().load()
    assert stored is not None
    state = decode(stored.full, stored.steps, snapshot_digest=agent.digest, root_run_id=ROOT_RUN)
    root = state.runs[journal.log[0].run_id]
    assert root.step == steps
    return journal, root


@tool("emit", idempotent=True)
def _emit(ctx: ToolContext, i: int) -> str:
    return f"payload {i} " + "p" * 300


async def test_appended_history_is_rarely_rewritten_into_a_full(
    tmp_path: Path,
) -> None:
    # Tool results only: what a resume replays is mostly the history itself, which a full
    # would hold again. Fulls are paid for by the ops the state replaces (here only counters:
    # a call's start, a response's issue and flush), so few are written; at every doubling
    # of the history, as before, they were ~90 % of the step bytes again.
    agent = dataclasses.replace(default_agent("scripted:test"), tools=(_emit,))

    def script(messages: list) -> ScriptStep:  # type: ignore[type-arg]
        n = sum(1 for m in messages if m.kind == "response")
        return ScriptStep(calls=(call("emit", i=n),))

    sizes = {}
    for steps in (100, 400):
        journal, _ = await _grow(tmp_path, agent, script, steps)
        assert journal.commits <= 2 * steps + 2  # one per model response, one per result
        fulls = journal.full_bytes_written
        assert fulls <= 0.25 * (journal.bytes_written - fulls), (steps, fulls)
        sizes[steps] = journal.bytes_written
    assert sizes[400] < 5 * sizes[100], sizes  # x4 steps, about x4 bytes


async def test_ops_the_state_replaces_are_compacted_into_fulls_and_bytes_stay_linear(
    tmp_path: Path,
) -> None:
    # A whole plan at every step: a resume would replay every plan, the state keeps one.
    plan = next(t for t in BUILTIN_TOOLS if t.name == "plan")
    agent = dataclasses.replace(default_agent("scripted:test"), tools=(_emit, plan))
    entries = [{"content": f"step {k} of a long plan, said in full"} for k in range(40)]

    def script(messages: list) -> ScriptStep:  # type: ignore[type-arg]
        n = sum(1 for m in messages if m.kind == "response")
        done = [
            {**e, "status": "completed" if k < n % 40 else "pending"} for k, e in enumerate(entries)
        ]
        return ScriptStep(calls=(call("plan", entries=done), call("emit", i=n)))

    sizes = {}
    for steps in (100, 400):
        journal, root = await _grow(tmp_path, agent, script, steps)
        stored = await journal.restarted().load()
        assert stored is not None and stored.full is not None, steps
        # Pruned: the plans the fulls superseded are gone; the last one survives a resume.
        assert journal.stored_bytes < journal.bytes_written
        assert [e["status"] for e in root.plan].count("completed") == (steps - 1) % 40
        sizes[steps] = (journal.stored_bytes, journal.bytes_written)
    (s100, w100), (s400, w400) = sizes[100], sizes[400]
    assert s400 < 5 * s100 and w400 < 6 * w100, sizes  # linear, not quadratic


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
