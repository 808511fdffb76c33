"""Shared helpers for the runtime tests: a deterministic environment and fact summaries."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

from pydantic_ai.models import Model

from opennua.runtime import (
    AgentDefinition,
    AgentLoop,
    Answer,
    DerivedIds,
    Limits,
    Outcome,
    RunEnv,
    RuntimeEvent,
    Suspended,
    Tool,
    ToolContext,
)
from opennua.runtime._sandbox import Sandbox, SandboxMode
from opennua.runtime._tools import MemoryArtifacts
from opennua.runtime.testing import InMemoryJournal, SimulatedCrash

EXECUTION = "exe_01JD0000000000000000000000"
ROOT_RUN = "run_01JD0000000000000000000000"
MS = 1_764_403_200_000  # 2025-11-29T08:00:00Z


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 0.001
        return self.t


def make_env(workdir: Path, artifacts: MemoryArtifacts | None = None, **fields: Any) -> RunEnv:
    """A deterministic environment; `fields` override RunEnv's (sandbox, sleep, …)."""
    return RunEnv(
        **{
            "execution_id": EXECUTION,
            "root_run_id": ROOT_RUN,
            "workdir": workdir,
            "ids": DerivedIds(EXECUTION, ms=MS),
            "artifacts": artifacts or MemoryArtifacts(),
            "clock": FakeClock(),
            "shell_env": {"PATH": "/usr/bin:/bin"},
            **fields,
        }
    )


def make_loop(
    agent: AgentDefinition,
    journal: InMemoryJournal,
    workdir: Path,
    model: Model,
    *,
    limits: Limits | None = None,
    artifacts: MemoryArtifacts | None = None,
    env: dict[str, Any] | None = None,
    **kw: Any,
) -> AgentLoop:
    return AgentLoop(
        agent,
        journal,
        make_env(workdir, artifacts, **(env or {})),
        model=model,
        limits=limits,
        **kw,
    )


def processes_running(marker: str) -> list[int]:
    """Host PIDs of processes whose command line contains `marker` (e.g. `sleep 31.337`):
    how a test sees a process tree outlive what should have killed it, sandboxed or not."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def event_json(event: RuntimeEvent) -> dict[str, Any]:
    return {
        "key": event.key,
        "run_id": event.run_id,
        "type": event.type,
        "data": event.data.model_dump(mode="json"),
    }


def log_json(events: list[RuntimeEvent]) -> list[dict[str, Any]]:
    return [event_json(e) for e in events]


def dedupe(events: list[RuntimeEvent]) -> list[RuntimeEvent]:
    """What the Host's log keeps: the first event of each key (re-emits deduplicate)."""
    seen: set[str] = set()
    out = []
    for e in events:
        if e.key not in seen:
            seen.add(e.key)
            out.append(e)
    return out


def facts(events: list[RuntimeEvent]) -> dict[str, Any]:
    """The final facts a log establishes, without the by-products of crashes (interrupted
    messages, `unknown` statuses and confirmations), which a test checks separately."""
    log = dedupe(events)
    interrupted = {
        e.data.message_id  # type: ignore[attr-defined]
        for e in log
        if e.type == "message.completed" and e.data.status == "interrupted"  # type: ignore[attr-defined]
    }
    # A model call re-issued after a crash is a new message with a new id, so messages are
    # compared by run and text, in order.
    messages: list[tuple[str, str, str]] = []
    tools: dict[str, Any] = {}
    plans: dict[str, Any] = {}
    other: list[Any] = []
    usage: dict[str, int] = {}
    for e in log:
        d = e.data.model_dump(mode="json")
        if e.type == "message.completed" and d["message_id"] not in interrupted:
            messages.append((e.run_id, "text", d["text"]))
        elif e.type == "reasoning.completed":
            messages.append((e.run_id, "reasoning", d["text"]))
        elif e.type == "tool_call.started":
            tools[d["tool_call_id"]] = {"name": d["name"], "input": d["input"]}
        elif e.type == "tool_call.updated":
            if d["status"] not in ("unknown", "in_progress"):
                tools[d["tool_call_id"]].update(
                    status=d["status"], output=d["output"], error=d["error"]
                )
        elif e.type == "plan.updated":
            plans[e.run_id] = d["entries"]
        elif e.type == "usage.recorded":
            for k, v in d.items():
                if isinstance(v, int):
                    usage[k] = usage.get(k, 0) + v
        elif (
            (e.type == "input_request.opened" and d["reason"] == "confirmation")
            or e.type in ("message.started", "message.delta", "reasoning.delta")
            or e.type == "message.completed"
        ):
            continue
        else:
            other.append([e.type, e.run_id, d])
    return {"messages": messages, "tools": tools, "plans": plans, "usage": usage, "other": other}


async def drive(
    make: Any,
    journal: InMemoryJournal,
    prompt: str,
    choices: dict[str, str] | None = None,
) -> tuple[Outcome, InMemoryJournal, list[Outcome | str]]:
    """Run to the end like a supervisor would: after a `SimulatedCrash` start a new loop on
    the restarted journal; after `Suspended` answer each request (by its reason) and resume.
    Returns the final outcome, the last journal and the history of outcomes/crashes."""
    choices = choices or {"tool_call": "allow_once", "confirmation": "retry"}
    history: list[Outcome | str] = []
    answers: dict[str, Answer] = {}
    for _ in range(50):
        try:
            outcome = await make(journal).run(prompt, answers=answers)
        except SimulatedCrash:
            history.append("crash")
            journal = journal.restarted()
            continue
        history.append(outcome)
        if not isinstance(outcome, Suspended):
            return outcome, journal, history
        for rid in outcome.request_ids:
            opened = [
                e
                for e in journal.log
                if e.type == "input_request.opened" and e.data.request_id == rid  # type: ignore[attr-defined]
            ][-1]
            reason = opened.data.reason  # type: ignore[attr-defined]
            if reason == "input_required":
                answers[rid] = Answer(payload="forty-two")
            else:
                answers[rid] = Answer(option_id=choices[reason])
        journal = journal.restarted()
    raise AssertionError(f"did not finish: {history}")


def counting(tool: Tool, counter: dict[str, int]) -> Tool:
    """`tool`, counting its executions: the side effects, measured, not read from a ledger."""
    original = tool.fn

    def fn(*args: Any, **kwargs: Any) -> Any:
        counter[tool.name] = counter.get(tool.name, 0) + 1
        return original(*args, **kwargs)

    return dataclasses.replace(tool, fn=fn)


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True)


def tool_context(workdir: Path, sandbox: SandboxMode | Sandbox = "bwrap") -> ToolContext:
    """A tool's context in `workdir`, confined by `sandbox`."""
    # No shell_env: the command gets the server's environment, scrubbed, as in `nua serve`.
    return ToolContext(
        workdir=workdir,
        run_id="run_x",
        tool_call_id="call_x",
        idempotency_key="call_x",
        artifacts=MemoryArtifacts(),
        cancel=asyncio.Event(),
        sandbox=sandbox if isinstance(sandbox, Sandbox) else Sandbox(sandbox),
    )
