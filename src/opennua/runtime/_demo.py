"""`scripted:demo`: the offline demo task, deterministic, one feature per step.

reasoning → plan → write a workspace file → `shell` (needs approval) → a `researcher`
sub-agent that plans and reads the file → publish `report.md` → a streamed final answer.

A turn whose client offers tools of its own (AG-UI frontend tools) plays a short script
instead: call the client's first tool, then answer with what it returned.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart
from pydantic_ai.tools import ToolDefinition

from opennua.runtime._scripted import ScriptCall, ScriptedModel, ScriptStep, call

DEMO_STEP_DELAY_ENV = "NUA_DEMO_STEP_DELAY"
DEFAULT_STEP_DELAY = 0.3

NOTES = (
    "# Notes\n\n"
    "- An opennua session outlives windows, connections and processes.\n"
    "- Executions resume from checkpoints after a crash.\n"
    "- Every client converges on the same ordered log.\n"
)
WORKER_TASK = "Read notes.md and summarize it in one sentence."
WORKER_SUMMARY = (
    "Sessions in opennua are durable: work resumes from checkpoints after crashes "
    "and every client sees the same log."
)
REPORT = (
    "# Report\n\n"
    f"{WORKER_SUMMARY}\n\n"
    "## Checks\n\n"
    "- notes.md was written, counted with `wc -l` and the count logged to checks.log.\n"
    "- A researcher sub-agent read and summarized it.\n"
)
FINAL = (
    "Done. I wrote notes.md, checked it with a shell command you approved, had a researcher "
    "sub-agent summarize it, and published report.md with the summary. Sessions in opennua are "
    "durable: you can disconnect, kill the server and resume, and nothing is lost or run twice."
)


def _plan(*states: str) -> list[dict[str, str]]:
    contents = (
        "Write working notes",
        "Check the notes with a shell command",
        "Delegate a summary to a researcher",
        "Publish report.md",
    )
    return [
        {"content": c, "status": s, "priority": "high" if i == 0 else "medium"}
        for i, (c, s) in enumerate(zip(contents, states, strict=True))
    ]


MAIN_SCRIPT: tuple[ScriptStep, ...] = (
    ScriptStep(
        reasoning="The user wants a short report. I will plan first, then work step by step.",
        calls=(call("plan", entries=_plan("in_progress", "pending", "pending", "pending")),),
    ),
    ScriptStep(
        reasoning="Writing the notes the report is based on.",
        calls=(call("write_file", path="notes.md", content=NOTES),),
    ),
    ScriptStep(
        reasoning="Counting the lines needs a shell command, which needs approval.",
        # Appends, so the effect is countable: checks.log has one line per run of it.
        calls=(
            call(
                "shell", command='echo "$(wc -l < notes.md) lines" >> checks.log && cat checks.log'
            ),
        ),
    ),
    ScriptStep(
        reasoning="The notes check out. A researcher can summarize them.",
        calls=(
            call("plan", entries=_plan("completed", "completed", "in_progress", "pending")),
            call("task", name="researcher", task=WORKER_TASK),
        ),
    ),
    ScriptStep(
        reasoning="Publishing the report with the researcher's summary.",
        calls=(
            call("plan", entries=_plan("completed", "completed", "completed", "completed")),
            call("publish_artifact", name="report.md", content=REPORT),
        ),
    ),
    ScriptStep(reasoning="Everything is done; summarizing for the user.", text=FINAL),
)

WORKER_SCRIPT: tuple[ScriptStep, ...] = (
    ScriptStep(
        reasoning="I will plan, read the notes, then summarize.",
        calls=(
            call(
                "plan",
                entries=[
                    {"content": "Read notes.md", "status": "in_progress"},
                    {"content": "Summarize in one sentence", "status": "pending"},
                ],
            ),
        ),
    ),
    ScriptStep(reasoning="Reading the file.", calls=(call("read_file", path="notes.md"),)),
    ScriptStep(
        reasoning="Marking my plan done.",
        calls=(
            call(
                "plan",
                entries=[
                    {"content": "Read notes.md", "status": "completed"},
                    {"content": "Summarize in one sentence", "status": "completed"},
                ],
            ),
        ),
    ),
    ScriptStep(reasoning="Answering with the summary.", text=WORKER_SUMMARY),
)


def _main(messages: Sequence[ModelMessage]) -> ScriptStep:
    """The main script, told truthfully: once the shell command did not run (refused by a
    person, or no sandbox could confine it), the rest says so instead of claiming it did."""
    index = sum(isinstance(m, ModelResponse) for m in messages)
    missed = _shell_missed(messages)
    if missed is not None and index >= 3:
        return _without_shell(index, missed)
    if index < len(MAIN_SCRIPT):
        return MAIN_SCRIPT[index]
    return ScriptStep(text="(the script has no more steps)")


def _shell_missed(messages: Sequence[ModelMessage]) -> str | None:
    """Why the shell command did not run, or None when it ran."""
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart) and part.tool_name == "shell":
                if part.outcome == "denied":
                    return "you did not approve it"
                if part.outcome != "success":
                    return str(part.content).split(". ")[0].strip()
    return None


def _without_shell(index: int, why: str) -> ScriptStep:
    if index == 3:
        return ScriptStep(
            reasoning=f"The shell command did not run: {why}. I will say so, and go on.",
            calls=(
                call("plan", entries=_plan("completed", "pending", "in_progress", "pending")),
                call("task", name="researcher", task=WORKER_TASK),
            ),
        )
    if index == 4:
        report = REPORT.replace(
            "- notes.md was written, counted with `wc -l` and the count logged to checks.log.",
            f"- notes.md was written; the shell check did NOT run ({why}).",
        )
        return ScriptStep(
            reasoning="Publishing the report, with the check that did not run named.",
            calls=(
                call("plan", entries=_plan("completed", "pending", "completed", "completed")),
                call("publish_artifact", name="report.md", content=report),
            ),
        )
    return ScriptStep(
        reasoning="Summarizing for the user, the missed step first.",
        text=(
            f"Done, except one step: the shell command did not run ({why}). I wrote "
            "notes.md, had a researcher sub-agent summarize it, and published report.md "
            "with the summary. Sessions in opennua are durable: you can disconnect, kill "
            "the server and resume, and nothing is lost or run twice."
        ),
    )


def _client_turn(messages: Sequence[ModelMessage], tools: Sequence[ToolDefinition]) -> ScriptStep:
    """Call the client's first tool, then say what it returned (so whoever reads the
    turn sees the model got the client's result)."""
    tool = tools[0]
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart) and part.tool_name == tool.name:
                return ScriptStep(
                    reasoning="The client ran its tool; answering with its result.",
                    text=f"The client tool `{tool.name}` returned: {part.content}",
                )
    return ScriptStep(
        reasoning=f"The client offers `{tool.name}`; the client runs it, so I call it.",
        calls=(ScriptCall(tool.name, _example_args(tool.parameters_json_schema)),),
    )


def _example_args(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments for a schema the demo knows nothing of: "demo" for each string property."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    return {
        name: "demo"
        for name, prop in properties.items()
        if isinstance(prop, dict) and prop.get("type") == "string"
    }


def demo_step_delay() -> float:
    raw = os.environ.get(DEMO_STEP_DELAY_ENV)
    return DEFAULT_STEP_DELAY if raw in (None, "") else float(raw)


def demo_model(step_delay: float | None = None) -> ScriptedModel:
    return ScriptedModel(
        _main,
        workers={WORKER_TASK: WORKER_SCRIPT},
        model_name="demo",
        step_delay=demo_step_delay() if step_delay is None else step_delay,
        client_script=_client_turn,
    )
