"""`scripted:demo`: the offline demo task, deterministic, one feature per step.

reasoning → plan → write a workspace file → `shell` (needs approval) → a `researcher`
sub-agent that plans and reads the file → publish `report.md` → a streamed final answer.
"""

from __future__ import annotations

import os

from opennua.runtime._scripted import ScriptedModel, ScriptStep, call

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


def demo_step_delay() -> float:
    raw = os.environ.get(DEMO_STEP_DELAY_ENV)
    return DEFAULT_STEP_DELAY if raw in (None, "") else float(raw)


def demo_model(step_delay: float | None = None) -> ScriptedModel:
    return ScriptedModel(
        MAIN_SCRIPT,
        workers={WORKER_TASK: WORKER_SCRIPT},
        model_name="demo",
        step_delay=demo_step_delay() if step_delay is None else step_delay,
    )
