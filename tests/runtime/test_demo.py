"""The demo task: golden event log, feature order, usage, and resume from every step."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from opennua.runtime import Completed, default_agent
from opennua.runtime._builtins import BUILTIN_TOOLS
from opennua.runtime._demo import REPORT, demo_model, demo_step_delay
from opennua.runtime._env import Limits
from opennua.runtime._tools import MemoryArtifacts
from opennua.runtime.testing import InMemoryJournal
from tests.runtime.helpers import counting, drive, facts, log_json, make_loop

GOLDEN = Path(__file__).parent / "golden" / "demo_events.json"
PROMPT = "Write a short report about opennua."


async def _uninterrupted(
    workdir: Path, limits: Limits | None = None
) -> tuple[Completed, InMemoryJournal, MemoryArtifacts]:
    agent = default_agent("scripted:demo")
    artifacts = MemoryArtifacts()
    journal = InMemoryJournal()

    def make(j: InMemoryJournal):  # type: ignore[no-untyped-def]
        return make_loop(agent, j, workdir, demo_model(), artifacts=artifacts, limits=limits)

    outcome, journal, _ = await drive(make, journal, PROMPT)
    assert isinstance(outcome, Completed)
    return outcome, journal, artifacts


async def test_demo_golden_log(tmp_path: Path) -> None:
    _, journal, artifacts = await _uninterrupted(tmp_path)
    got = log_json(journal.log)
    if os.environ.get("NUA_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(GOLDEN.read_text())
    assert list(artifacts.blobs.values()) == [REPORT.encode()]
    assert (tmp_path / "notes.md").read_text().startswith("# Notes")


async def test_demo_exercises_every_feature_in_order(tmp_path: Path) -> None:
    # Each delta its own batch, as when a model streams slower than the batch window.
    outcome, journal, _ = await _uninterrupted(tmp_path, Limits(delta_batch_seconds=0))
    root = journal.log[0].run_id
    milestones = []
    for e in journal.log:
        d = e.data.model_dump()
        if e.type == "reasoning.completed" and "reasoning" not in milestones:
            milestones.append("reasoning")
        elif e.type == "plan.updated" and e.run_id == root and "plan" not in milestones:
            milestones.append("plan")
        elif e.type == "file.changed":
            milestones.append("file")
        elif e.type == "input_request.opened":
            milestones.append("approval:" + d["reason"])
        elif e.type == "worker.started":
            milestones.append("worker")
        elif e.type == "plan.updated" and e.run_id != root and "worker_plan" not in milestones:
            milestones.append("worker_plan")
        elif e.type == "tool_call.started" and e.run_id != root:
            milestones.append("worker_tool:" + d["name"])
        elif e.type == "worker.ended":
            milestones.append("worker_ended")
        elif e.type == "artifact.published":
            milestones.append("artifact:" + d["name"])
        elif e.type == "message.completed" and d["text"] and e.run_id == root:
            milestones.append("answer")
    assert milestones == [
        "reasoning",
        "plan",
        "file",
        "approval:tool_call",
        "worker",
        "worker_tool:plan",
        "worker_plan",
        "worker_tool:read_file",
        "worker_tool:plan",
        "worker_ended",
        "artifact:report.md",
        "answer",
    ]
    usages = [e.data for e in journal.log if e.type == "usage.recorded"]
    assert len(usages) == 10  # one per model call
    # Only a response with text is a message: the sub-agent's summary and the answer.
    started = [e.data.message_id for e in journal.log if e.type == "message.started"]  # type: ignore[attr-defined]
    completed = [e.data for e in journal.log if e.type == "message.completed"]
    assert [c.message_id for c in completed] == started and len(started) == 2  # type: ignore[attr-defined]
    assert all(c.text and c.status == "complete" for c in completed)  # type: ignore[attr-defined]
    for u in usages:
        fields = u.model_dump()
        assert fields["provider"] == "scripted" and fields["model"] == "demo"
        assert all(fields[k] > 0 for k in fields if k.endswith("tokens")), fields
        assert u.cache_read_input_tokens < u.input_tokens  # input includes cached tokens
    # The sub-agent's usage is rolled up into the execution's.
    assert outcome.usage["input_tokens"] == sum(u.input_tokens for u in usages)
    final = [e for e in journal.log if e.type == "message.delta" and e.run_id == root]
    assert len(final) > 5  # streamed, not one blob


def test_demo_step_delay_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NUA_DEMO_STEP_DELAY")
    assert demo_step_delay() == 0.3
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0.05")
    assert demo_model().step_delay == 0.05


async def test_demo_resume_from_every_step_boundary(tmp_path: Path) -> None:
    reference_ws = tmp_path / "ref"
    reference_ws.mkdir()
    _, ref_journal, _ = await _uninterrupted(reference_ws)
    expected = facts(ref_journal.log)
    boundaries = ref_journal.commits
    assert boundaries >= 20
    for k in range(1, boundaries):
        ws = tmp_path / f"k{k}"
        ws.mkdir()
        counts: dict[str, int] = {}
        agent = dataclasses.replace(
            default_agent("scripted:demo"), tools=tuple(counting(t, counts) for t in BUILTIN_TOOLS)
        )

        def make(j: InMemoryJournal, agent=agent, ws=ws):  # type: ignore[no-untyped-def]
            return make_loop(agent, j, ws, demo_model())

        outcome, journal, history = await drive(make, InMemoryJournal(crash_after=k), PROMPT)
        assert "crash" in history, k
        assert isinstance(outcome, Completed), (k, history)
        assert facts(journal.log) == expected, k
        # Every side effect happened exactly once, counted at the tool itself.
        for name in ("write_file", "shell", "publish_artifact"):
            assert counts.get(name) == 1, (k, name, counts)
        assert (ws / "notes.md").read_text() == (reference_ws / "notes.md").read_text()


@pytest.mark.usefixtures("broken_bwrap")
async def test_the_demo_says_when_its_shell_step_did_not_run(tmp_path: Path) -> None:
    # On a machine where no sandbox starts, the shell step fails; the demo says so plainly
    # instead of telling the user it ran (issue 29, "the sandbox on a fresh machine").
    agent = default_agent("scripted:demo")

    def make(j: InMemoryJournal):  # type: ignore[no-untyped-def]
        return make_loop(agent, j, tmp_path, demo_model())

    outcome, journal, _ = await drive(make, InMemoryJournal(), PROMPT)
    assert isinstance(outcome, Completed)
    assert outcome.output.startswith(
        "Done, except one step: the shell command did not run (shell is disabled: "
        "bubblewrap cannot start: bwrap: No permissions to create a new namespace)"
    )
    assert "you approved" not in outcome.output
    assert not (tmp_path / "checks.log").exists()
    root = journal.log[0].run_id
    plans = [e.data for e in journal.log if e.type == "plan.updated" and e.run_id == root]
    last = plans[-1].entries  # type: ignore[attr-defined]
    assert [e.status for e in last] == ["completed", "pending", "completed", "completed"]


async def test_the_demo_says_when_its_shell_step_was_rejected(tmp_path: Path) -> None:
    agent = default_agent("scripted:demo")

    def make(j: InMemoryJournal):  # type: ignore[no-untyped-def]
        return make_loop(agent, j, tmp_path, demo_model())

    choices = {"tool_call": "reject_once", "confirmation": "retry"}
    outcome, _, _ = await drive(make, InMemoryJournal(), PROMPT, choices)
    assert isinstance(outcome, Completed)
    assert outcome.output.startswith(
        "Done, except one step: the shell command did not run (you did not approve it)"
    )
