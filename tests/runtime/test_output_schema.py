"""A structured result: the root run's final answer must be JSON that fits the agent's
output schema; one that does not is sent back with its errors (a checkpointed prompt, so a
crash anywhere replays to the same facts) up to `output_retries` times, then the turn fails
with `output_invalid`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart

from opennua.runtime import AgentDefinition, Completed, Stopped, default_agent
from opennua.runtime._output import check_output
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, ScriptStep, call, say
from tests.runtime.helpers import drive, facts, make_loop

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["category", "severity"],
    "properties": {
        "category": {"type": "string", "enum": ["bug", "question"]},
        "severity": {"type": "integer", "minimum": 1, "maximum": 4},
    },
    "additionalProperties": False,
}
GOOD = {"category": "bug", "severity": 2}
BAD = {"category": "rant", "severity": 9}


def _agent(retries: int = 2) -> AgentDefinition:
    return dataclasses.replace(
        default_agent("scripted:test"), output_schema=SCHEMA, output_retries=retries
    )


class Recording(ScriptedModel):
    """Plays `script` (its last step again past the end), keeping every history it saw."""

    def __init__(self, script: list[ScriptStep]) -> None:
        self.seen: list[list[ModelMessage]] = []

        def play(messages: list[ModelMessage]) -> ScriptStep:
            self.seen.append(list(messages))
            index = sum(isinstance(m, ModelResponse) for m in messages)
            return script[min(index, len(script) - 1)]

        super().__init__(play)


def _prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        p.content
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart) and isinstance(p.content, str)
    ]


async def test_a_fitting_answer_is_the_turns_result(tmp_path: Path) -> None:
    model = Recording([say(json.dumps(GOOD))])
    outcome = await make_loop(_agent(), InMemoryJournal(), tmp_path, model).run("triage this")
    assert isinstance(outcome, Completed)
    assert (outcome.result, outcome.structured) == (GOOD, True)
    # The model was told the shape up front, in the root run's instructions.
    first = model.seen[0][0]
    assert isinstance(first, ModelRequest) and first.instructions is not None
    assert '"additionalProperties": false' in first.instructions
    assert "single JSON document" in first.instructions


async def test_without_a_schema_the_answer_is_not_read(tmp_path: Path) -> None:
    agent = default_agent("scripted:test")
    outcome = await make_loop(agent, InMemoryJournal(), tmp_path, say_model("not json")).run("x")
    assert isinstance(outcome, Completed) and not outcome.structured and outcome.result is None


def say_model(*texts: str) -> ScriptedModel:
    return ScriptedModel([say(t) for t in texts])


def test_a_fenced_block_or_bare_json_is_read_prose_is_not() -> None:
    fenced = f"Here is the triage:\n\n```json\n{json.dumps(GOOD, indent=1)}\n```\n"
    assert check_output(fenced, SCHEMA).value == GOOD
    assert check_output(f"  {json.dumps(GOOD)}\n", SCHEMA).value == GOOD
    prose = check_output("It is a bug, severity 2.", SCHEMA)
    assert not prose.valid and prose.errors[0].startswith("the answer is not JSON (")
    wrong = check_output(json.dumps(BAD | {"extra": 1}), SCHEMA)
    assert wrong.value is None
    assert wrong.errors == (
        "$: Additional properties are not allowed ('extra' was unexpected)",
        "$.category: 'rant' is not one of ['bug', 'question']",
        "$.severity: 9 is greater than the maximum of 4",
    )


async def test_an_unfit_answer_is_retried_with_its_errors_then_accepted(tmp_path: Path) -> None:
    model = Recording([say(json.dumps(BAD)), say(json.dumps(GOOD))])
    journal = InMemoryJournal()
    outcome = await make_loop(_agent(), journal, tmp_path, model).run("triage this")
    assert isinstance(outcome, Completed) and outcome.result == GOOD
    retry = _prompts(model.seen[-1])[-1]
    assert retry.startswith("Your final answer does not conform to the required JSON Schema")
    assert "- $.severity: 9 is greater than the maximum of 4" in retry
    texts = [e.data.text for e in journal.log if e.type == "message.completed"]  # type: ignore[attr-defined]
    assert texts == [json.dumps(BAD), json.dumps(GOOD)], "both answers are in the log"
    stored = await journal.load()
    assert stored is not None


async def test_a_retry_is_replay_safe_from_every_commit(tmp_path: Path) -> None:
    def make(ws: Path) -> Any:
        return lambda j: make_loop(
            _agent(), j, ws, ScriptedModel([say("no JSON here"), say(json.dumps(GOOD))])
        )

    ref_ws = tmp_path / "ref"
    ref_ws.mkdir()
    reference, ref, _ = await drive(make(ref_ws), InMemoryJournal(), "triage this")
    assert isinstance(reference, Completed) and reference.result == GOOD
    for k in range(1, ref.commits + 1):
        ws = tmp_path / f"k{k}"
        ws.mkdir()
        outcome, journal, history = await drive(make(ws), InMemoryJournal(crash_after=k), "t")
        assert "crash" in history, k
        assert isinstance(outcome, Completed) and outcome.result == GOOD, (k, history)
        assert facts(journal.log)["messages"] == facts(ref.log)["messages"], k


@pytest.mark.parametrize("retries", [0, 2])
async def test_answers_that_never_fit_fail_the_turn_with_output_invalid(
    tmp_path: Path, retries: int
) -> None:
    model = Recording([say(json.dumps(BAD))])
    journal = InMemoryJournal()
    outcome = await make_loop(_agent(retries), journal, tmp_path, model).run("triage this")
    assert isinstance(outcome, Stopped) and outcome.stop_reason == "failed"
    assert outcome.error is not None and outcome.error.code == "output_invalid"
    tried = f" after {retries} retries" if retries else ""
    assert outcome.error.message.startswith(
        f"the final answer does not conform to the output schema{tried}: "
    )
    assert "$.category: 'rant' is not one of ['bug', 'question']" in outcome.error.message
    responses = [e for e in journal.log if e.type == "message.completed"]
    assert len(responses) == retries + 1, "the first answer and one per retry"
    assert all(e.data.status == "complete" for e in responses)  # type: ignore[attr-defined]


async def test_a_sub_agents_answer_is_not_held_to_the_schema(tmp_path: Path) -> None:
    task = "Summarize the ticket in prose."
    model = ScriptedModel(
        [ScriptStep(calls=(call("task", task=task),)), say(json.dumps(GOOD))],
        workers={task: [say("A short prose summary, not JSON.")]},
    )
    outcome = await make_loop(_agent(0), InMemoryJournal(), tmp_path, model).run("triage")
    assert isinstance(outcome, Completed) and outcome.result == GOOD
