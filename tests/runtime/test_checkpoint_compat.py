"""Checkpoints written by an earlier release still resume.

`fixtures/checkpoint_v2_*.json` were written by format 2 (commit 60e2267, before the ops were
typed) by `_scenario` below: an agent whose sub-agent asks for approval of a side effect, run
until it suspends, then resumed with the approval and killed a few commits later. One file
holds steps only (all eleven op kinds), the other a compacted full checkpoint and the steps
after it. A resume from them must do exactly what a resume from the same
point written by today's code does, and must not repeat the side effect.

Format 4 starts a message only when its text begins, so the root's model call that format 2
had opened with a `message.started` is, today, a call without a message: the only
difference a resume may show is that format 2's resume closes that message first.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from opennua.protocol.actions import PlanEntry, PlanUpdated
from opennua.runtime import (
    AgentDefinition,
    Answer,
    Completed,
    Limits,
    Suspended,
    ToolContext,
    tool,
)
from opennua.runtime._journal import _Durable
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, ScriptStep, SimulatedCrash, say
from opennua.runtime.testing import call as script_call
from tests.runtime.helpers import ROOT_RUN, log_json, make_loop

FIXTURES = Path(__file__).parent / "fixtures"
TASK = "Charge the card, with approval."
#: Commits the resumed attempt lands before it is killed (the fixture's crash point).
CRASH_AFTER = {"steps": 4, "full": 4}


@tool("plan", kind="think", idempotent=True)
def _plan(ctx: ToolContext, entries: list[str]) -> str:
    """Replace the plan."""
    ctx.report(
        PlanUpdated(
            entries=[
                PlanEntry(id=str(i), content=e, status="pending") for i, e in enumerate(entries)
            ]
        )
    )
    return "planned"


@tool("task", idempotent=True)
def _task(name: str, task: str) -> str:
    """Run a sub-agent."""
    raise AssertionError("the loop runs `task` as a nested run")


@tool("charge", kind="execute", requires_approval=True)
def _charge(ctx: ToolContext, amount: int) -> str:
    """Charge the card."""
    with (ctx.workdir / "charges.txt").open("a") as f:
        f.write(f"{ctx.idempotency_key} {amount}\n")
    return f"charged {amount}"


AGENT = AgentDefinition(
    name="compat",
    instructions="Work carefully.",
    worker_instructions="Do the task.",
    model="scripted:compat",
    tools=(_plan, _task, _charge),
)


def _model() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptStep(
                reasoning="Delegating.",
                calls=(
                    script_call("plan", entries=["delegate"]),
                    script_call("task", name="payer", task=TASK),
                ),
            ),
            say("The card is charged."),
        ],
        workers={
            TASK: [
                ScriptStep(calls=(script_call("plan", entries=["charge"]),)),
                ScriptStep(text="Charging now.", calls=(script_call("charge", amount=5),)),
                ScriptStep(calls=(script_call("nope"),)),  # an invalid call: a `retries` result
                say("Charged 5."),
            ]
        },
    )


def _limits(kind: str) -> Limits:
    # `full`: compact so eagerly that the stored checkpoint has a full and steps after it.
    return Limits(compact_min_bytes=1) if kind == "full" else Limits()


async def _scenario(kind: str, workdir: Path) -> tuple[InMemoryJournal, dict[str, Answer]]:
    """Run until the approval, then resume approved and die after `CRASH_AFTER[kind]`
    commits. Returns the journal as the dead process left it, and the answers."""
    journal = InMemoryJournal()
    first = await make_loop(AGENT, journal, workdir, _model(), limits=_limits(kind)).run("go")
    assert isinstance(first, Suspended)
    answers = {first.request_ids[0]: Answer(option_id="allow_once")}
    dying = InMemoryJournal(crash_after=journal.commits + CRASH_AFTER[kind], _durable=journal._d)
    loop = make_loop(AGENT, dying, workdir, _model(), limits=_limits(kind))
    with pytest.raises(SimulatedCrash):
        await loop.run("go", answers=answers)
    return dying, answers


def _dump(journal: InMemoryJournal, answers: dict[str, Answer]) -> dict[str, Any]:
    d = journal._d

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {
        "full": b64(d.full) if d.full is not None else None,
        "full_step_no": d.full_step_no,
        "steps": [[n, b64(p)] for n, p in d.steps],
        "ledger": d.ledger,
        "answers": {k: a.option_id for k, a in answers.items()},
    }


def _load(kind: str) -> tuple[InMemoryJournal, dict[str, Answer]]:
    doc = json.loads((FIXTURES / f"checkpoint_v2_{kind}.json").read_text())
    durable = _Durable(
        full=base64.b64decode(doc["full"]) if doc["full"] is not None else None,
        full_step_no=doc["full_step_no"],
        steps=[(n, base64.b64decode(p)) for n, p in doc["steps"]],
        ledger=doc["ledger"],
    )
    answers = {k: Answer(option_id=v) for k, v in doc["answers"].items()}
    return InMemoryJournal(_durable=durable), answers


async def _resume(
    journal: InMemoryJournal, answers: dict[str, Answer], workdir: Path, kind: str
) -> tuple[Completed, list[dict[str, Any]]]:
    before = len(journal.log)
    outcome = await make_loop(AGENT, journal, workdir, _model(), limits=_limits(kind)).run(
        "go", answers=answers
    )
    assert isinstance(outcome, Completed), outcome
    return outcome, log_json(journal.log[before:])


@pytest.mark.parametrize("kind", ["steps", "full"])
async def test_a_format_2_checkpoint_resumes_like_one_written_today(
    tmp_path: Path, kind: str
) -> None:
    stored, answers = _load(kind)
    assert (stored._d.full is not None) == (kind == "full")
    # The side effect happened once before the crash, in the process that wrote the fixture.
    old_ws = tmp_path / "old"
    old_ws.mkdir()
    outcome, old_events = await _resume(stored, answers, old_ws, kind)

    new_ws = tmp_path / "new"
    new_ws.mkdir()
    today, today_answers = await _scenario(kind, new_ws)
    assert today_answers == answers
    (new_ws / "charges.txt").unlink()  # what ran before the crash, not the resume
    today_outcome, new_events = await _resume(today.restarted(), answers, new_ws, kind)

    assert outcome.output == today_outcome.output == "The card is charged."
    assert outcome.usage == today_outcome.usage
    closed, *rest = old_events
    assert closed["key"] == f"{ROOT_RUN}/s1/m1/interrupted" and closed["data"]["status"] == (
        "interrupted"
    )
    assert rest == new_events
    assert not any(e["key"].endswith("/interrupted") for e in new_events)
    assert not (old_ws / "charges.txt").exists()  # resuming never repeats the charge
    completed = [e["data"]["text"] for e in old_events if e["type"] == "message.completed"]
    assert completed[-1] == "The card is charged."


if __name__ == "__main__":  # pragma: no cover - how the fixtures were written (format 2)
    import asyncio
    import tempfile

    async def _write() -> None:
        for kind in CRASH_AFTER:
            with tempfile.TemporaryDirectory() as ws:
                journal, answers = await _scenario(kind, Path(ws))
            path = FIXTURES / f"checkpoint_v2_{kind}.json"
            path.write_text(json.dumps(_dump(journal, answers), indent=1) + "\n")

    asyncio.run(_write())
