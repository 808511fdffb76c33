"""Resume: sub-agent with approval at every boundary, the ledger's reconciliation rules,
interrupted streams, checkpoint compatibility and fencing."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from opennua.runtime import (
    AgentDefinition,
    Answer,
    Completed,
    DerivedIds,
    IncompatibleCheckpoint,
    Limits,
    OwnershipLost,
    Suspended,
    Tool,
    ToolContext,
    default_agent,
    tool,
)
from opennua.runtime._agent import ADDED_BUILTINS
from opennua.runtime._builtins import BUILTIN_TOOLS
from opennua.runtime._checkpoint import unpack
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, ScriptStep, call, say
from tests.runtime.helpers import EXECUTION, MS, ROOT_RUN, counting, drive, facts, make_loop

WORKER_TASK = "Append a line to effects.txt, with approval."


def _subagent_model() -> ScriptedModel:
    return ScriptedModel(
        [ScriptStep(calls=(call("task", name="helper", task=WORKER_TASK),)), say("All done.")],
        workers={
            WORKER_TASK: [
                ScriptStep(
                    reasoning="Planning.",
                    calls=(call("plan", entries=[{"content": "append", "status": "in_progress"}]),),
                ),
                ScriptStep(calls=(call("shell", command="echo effect >> effects.txt"),)),
                ScriptStep(
                    calls=(call("plan", entries=[{"content": "append", "status": "completed"}]),)
                ),
                say("Appended one line."),
            ]
        },
    )


def _agent(counts: dict[str, int]) -> AgentDefinition:
    return dataclasses.replace(
        default_agent("scripted:test"), tools=tuple(counting(t, counts) for t in BUILTIN_TOOLS)
    )


async def test_subagent_approval_suspends_whole_execution_and_resumes_inside(
    tmp_path: Path,
) -> None:
    counts: dict[str, int] = {}
    agent = _agent(counts)
    journal = InMemoryJournal()
    first = await make_loop(agent, journal, tmp_path, _subagent_model()).run("go")
    assert isinstance(first, Suspended)
    opened = [e for e in journal.log if e.type == "input_request.opened"]
    worker = next(e for e in journal.log if e.type == "worker.started")
    assert opened[0].run_id == worker.data.worker_run_id  # type: ignore[attr-defined]
    assert counts.get("shell") is None
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, tmp_path, _subagent_model()), journal.restarted(), "go"
    )
    assert isinstance(outcome, Completed) and outcome.output == "All done."
    assert (tmp_path / "effects.txt").read_text() == "effect\n"
    ended = [e for e in journal.log if e.type == "worker.ended"]
    assert [e.data.status for e in ended] == ["completed"]  # type: ignore[attr-defined]
    worker_usage = [
        e for e in journal.log if e.type == "usage.recorded" and e.run_id != journal.log[0].run_id
    ]
    assert len(worker_usage) == 4
    assert outcome.usage["input_tokens"] > sum(e.data.input_tokens for e in worker_usage)  # type: ignore[attr-defined]


async def test_subagent_with_approval_resumes_from_every_boundary(tmp_path: Path) -> None:
    ref_ws = tmp_path / "ref"
    ref_ws.mkdir()
    counts: dict[str, int] = {}
    _, ref, _ = await drive(
        lambda j: make_loop(_agent(counts), j, ref_ws, _subagent_model()), InMemoryJournal(), "go"
    )
    expected = facts(ref.log)
    for k in range(1, ref.commits):
        ws = tmp_path / f"k{k}"
        ws.mkdir()
        counts = {}
        agent = _agent(counts)
        outcome, journal, history = await drive(
            lambda j, agent=agent, ws=ws: make_loop(agent, j, ws, _subagent_model()),
            InMemoryJournal(crash_after=k),
            "go",
        )
        assert "crash" in history and isinstance(outcome, Completed), (k, history)
        assert facts(journal.log) == expected, k
        assert counts["shell"] == 1, k
        assert (ws / "effects.txt").read_text() == "effect\n", k  # the side effect, measured


def _charging(effects: list[str], *, idempotent: bool) -> Tool:
    @tool("charge", kind="execute", idempotent=idempotent)
    def charge(ctx: ToolContext, amount: int) -> str:
        effects.append(ctx.idempotency_key)
        return f"charged {amount}"

    return charge


def _charge_model() -> ScriptedModel:
    return ScriptedModel([ScriptStep(calls=(call("charge", amount=5),)), say("Charged.")])


@pytest.mark.parametrize("choice", ["retry", "skip"])
async def test_crash_between_ledger_started_and_completed_asks_never_reruns(
    tmp_path: Path, choice: str
) -> None:
    effects: list[str] = []
    agent = dataclasses.replace(
        default_agent("scripted:test"), tools=(_charging(effects, idempotent=False),)
    )
    # Commits: 1 opens the run, 2 records the response and `started`, 3 would record the result.
    journal = InMemoryJournal(crash_before=3)
    loop = make_loop(agent, journal, tmp_path, _charge_model())
    with pytest.raises(Exception, match="crash before commit 3"):
        await loop.run("charge me")
    assert len(effects) == 1 and journal.ledger == {effects[0]: "started"}

    resumed = await make_loop(agent, journal.restarted(), tmp_path, _charge_model()).run(
        "charge me"
    )
    assert isinstance(resumed, Suspended)
    assert len(effects) == 1  # not silently re-run
    unknown = [
        e for e in journal.log if e.type == "tool_call.updated" and e.data.status == "unknown"
    ]  # type: ignore[attr-defined]
    request = [e for e in journal.log if e.type == "input_request.opened"][-1]
    assert len(unknown) == 1 and request.data.reason == "confirmation"  # type: ignore[attr-defined]
    assert [o.option_id for o in request.data.options] == ["retry", "skip"]  # type: ignore[attr-defined]
    assert journal.ledger[effects[0]] == "unknown"

    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, tmp_path, _charge_model()),
        journal.restarted(),
        "charge me",
        {"confirmation": choice},
    )
    assert isinstance(outcome, Completed)
    final = [e for e in journal.log if e.type == "tool_call.updated"][-1].data
    if choice == "retry":
        assert len(effects) == 2 and final.status == "completed"  # type: ignore[attr-defined]
    else:
        assert len(effects) == 1 and final.status == "failed"  # type: ignore[attr-defined]
        assert final.error.code == "skipped"  # type: ignore[attr-defined]


async def test_a_confirmed_rerun_that_dies_too_asks_again(tmp_path: Path) -> None:
    """Found by the chaos run (issue 20): "Run again" authorizes one run. When that run
    dies before its result too, the next attempt must ask again, not re-run it on the
    strength of the old answer."""
    effects: list[str] = []
    agent = dataclasses.replace(
        default_agent("scripted:test"), tools=(_charging(effects, idempotent=False),)
    )
    journal = InMemoryJournal(crash_before=3)  # dies running `charge` the first time
    with pytest.raises(Exception, match="crash before commit 3"):
        await make_loop(agent, journal, tmp_path, _charge_model()).run("charge me")
    asked = await make_loop(agent, journal.restarted(), tmp_path, _charge_model()).run("charge me")
    assert isinstance(asked, Suspended) and len(effects) == 1
    answers = {rid: Answer(option_id="retry") for rid in asked.request_ids}
    # The confirmed re-run starts (one commit) and dies before its result (the next).
    durable = journal._d
    durable.crashed = False
    rerun = InMemoryJournal(crash_before=durable.commits + 2, _durable=durable)
    with pytest.raises(Exception, match="crash before commit"):
        await make_loop(agent, rerun, tmp_path, _charge_model()).run("charge me", answers=answers)
    assert len(effects) == 2
    again = await make_loop(agent, rerun.restarted(), tmp_path, _charge_model()).run(
        "charge me", answers=answers
    )
    assert len(effects) == 2, "re-run without asking"
    assert isinstance(again, Suspended)
    assert set(again.request_ids).isdisjoint(answers), "a new question, not the old one"
    reasons = [e.data.reason for e in rerun.log if e.type == "input_request.opened"]  # type: ignore[attr-defined]
    assert reasons == ["confirmation", "confirmation"]


async def test_idempotent_tool_reruns_with_the_same_key(tmp_path: Path) -> None:
    effects: list[str] = []
    agent = dataclasses.replace(
        default_agent("scripted:test"), tools=(_charging(effects, idempotent=True),)
    )
    outcome, journal, history = await drive(
        lambda j: make_loop(agent, j, tmp_path, _charge_model()),
        InMemoryJournal(crash_before=3),
        "charge me",
    )
    assert history[0] == "crash" and isinstance(outcome, Completed)
    assert len(effects) == 2 and effects[0] == effects[1]  # same idempotency key
    assert not [e for e in journal.log if e.type == "input_request.opened"]


async def test_interrupted_stream_is_closed_then_reissued_as_a_new_message(tmp_path: Path) -> None:
    agent = default_agent("scripted:test")
    model = ScriptedModel([say("Hello there, this is a streamed answer.")])
    # Each delta its own batch, as when a model streams slower than the batch window.
    # Commit 1 opens the run and its first model call, commit 2 starts its message with its
    # first delta; the crash loses the rest of the stream and the response.
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, tmp_path, model, limits=Limits(delta_batch_seconds=0)),
        InMemoryJournal(crash_after=2),
        "hi",
    )
    assert isinstance(outcome, Completed)
    started = [e.data.message_id for e in journal.log if e.type == "message.started"]  # type: ignore[attr-defined]
    completed = [
        (e.data.message_id, e.data.status) for e in journal.log if e.type == "message.completed"
    ]  # type: ignore[attr-defined]
    assert len(started) == 2 and started[0] != started[1]
    assert completed == [(started[0], "interrupted"), (started[1], "complete")]
    closed_at = next(i for i, e in enumerate(journal.log) if e.type == "message.completed")
    assert journal.log[closed_at + 1].type == "message.started"  # closed before re-issuing


async def test_a_call_lost_before_its_text_began_leaves_no_message(tmp_path: Path) -> None:
    agent = default_agent("scripted:test")
    model = ScriptedModel([say("Hello there, this is a streamed answer.")])
    # Commit 1 opens the run and its first model call; the crash comes as its text begins.
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, tmp_path, model), InMemoryJournal(crash_after=1), "hi"
    )
    assert isinstance(outcome, Completed)
    messages = [(e.type, e.data.message_id) for e in journal.log if e.type.startswith("message.")]  # type: ignore[attr-defined]
    # Only the re-issued call's message: nothing of the lost one to close.
    assert [t for t, _ in messages] == ["message.started", "message.completed"]
    # The re-issued try's id (try 2): the lost try 1 may have streamed reasoning under its own.
    ids = DerivedIds(EXECUTION, ms=MS)
    assert messages[0][1] == messages[1][1] == ids("message", f"{ROOT_RUN}/s0/m2")


async def test_resume_refuses_an_incompatible_checkpoint(tmp_path: Path) -> None:
    agent = default_agent("scripted:test")
    journal = InMemoryJournal(crash_after=2)
    model = ScriptedModel([ScriptStep(calls=(call("plan", entries=[]),)), say("ok")])
    with pytest.raises(Exception, match="crash"):
        await make_loop(agent, journal, tmp_path, model).run("x")
    other = dataclasses.replace(agent, instructions="something else")
    with pytest.raises(IncompatibleCheckpoint) as err:
        await make_loop(other, journal.restarted(), tmp_path, model).run("x")
    assert err.value.code == "incompatible_checkpoint"

    step_no, payload = journal._d.steps[0]
    doc = json.loads(unpack(payload))
    doc["v"] = 99
    journal._d.steps[0] = (step_no, json.dumps(doc).encode())
    with pytest.raises(IncompatibleCheckpoint, match="format 99"):
        await make_loop(agent, journal.restarted(), tmp_path, model).run("x")


async def test_fenced_journal_stops_the_attempt_at_once(tmp_path: Path) -> None:
    agent = default_agent("scripted:test")
    journal = InMemoryJournal()
    journal.fenced = True
    with pytest.raises(OwnershipLost):
        await make_loop(agent, journal, tmp_path, ScriptedModel([say("x")])).run("x")
    assert journal.log == [] and journal.commits == 0


#: What the built-in agent's digest was before it became the built-in plugin (commit
#: 647ecc1, `default_agent("scripted:test")`): checkpoints in data directories carry it.
PRE_PLUGIN_DIGEST = "sha256:9bf741ac26542410d5b3636e7581f9f5be6091bd96a737671b9582e293360d1c"


async def test_a_checkpoint_from_before_plugins_resumes_on_the_builtin_plugin(
    tmp_path: Path,
) -> None:
    agent = default_agent("scripted:test")
    assert agent.plugin is not None and agent.digest != PRE_PLUGIN_DIGEST
    # The definition as the old release had it: no plugin, nor the built-ins added since.
    older = tuple(t for t in agent.tools if t.name not in ADDED_BUILTINS)
    before = dataclasses.replace(agent, plugin=None, tools=older)
    assert before.digest == PRE_PLUGIN_DIGEST
    journal = InMemoryJournal(crash_after=2)
    model = ScriptedModel([ScriptStep(calls=(call("plan", entries=[]),)), say("ok")])
    with pytest.raises(Exception, match="crash"):
        await make_loop(before, journal, tmp_path, model).run("x")
    outcome = await make_loop(agent, journal.restarted(), tmp_path, model).run("x")
    assert isinstance(outcome, Completed), outcome
    # Another plugin's definition is not that agent: still refused.
    other = dataclasses.replace(before, instructions="something else")
    assert (
        PRE_PLUGIN_DIGEST not in dataclasses.replace(other, plugin=agent.plugin).equivalent_digests
    )
