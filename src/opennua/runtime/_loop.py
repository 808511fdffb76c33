"""The agent loop: model responses and tool calls as checkpointed steps.

Three parts, each with one job: the `StepWriter` makes every change durable (state ops,
events and ledger ops of a step in one journal commit, pipelined and group-committed), the
`ModelCalls` open, stream and retry model calls, the `ToolCalls` approve, run and record
tool calls and sub-agents. The loop drives runs through them and ends them consistently.

The next step's opening facts (the next tool's ledger `started`, the next model call's
issue) ride in the commit that ends the current step: one commit per step. The
loop waits for every queued step to be durable before anything that needs it: a delta emit,
a tool that is not idempotent (its ledger `started` rides in a queued step) and returning an
outcome. Only an idempotent tool runs ahead of its `started` record; a crash then re-runs it
with the same key, which is its contract.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Literal

from pydantic_ai.messages import ModelRequest, TextPart, UserPromptPart
from pydantic_ai.models import Model

from opennua.protocol import actions as pa
from opennua.runtime._a2a import a2a_tool
from opennua.runtime._agent import AgentDefinition
from opennua.runtime._budget import Budget
from opennua.runtime._calls import ToolCalls
from opennua.runtime._checkpoint import decode
from opennua.runtime._control import Cancelled, CancelScope, Stop, Suspend
from opennua.runtime._env import (
    Answer,
    Completed,
    Limits,
    Outcome,
    RunEnv,
    Stopped,
    Suspended,
)
from opennua.runtime._errors import RuntimeFailure
from opennua.runtime._events import RuntimeEvent
from opennua.runtime._journal import Journal, LedgerOp
from opennua.runtime._mcp import McpUnavailable, connect_mcp
from opennua.runtime._model_calls import ModelCalls
from opennua.runtime._models import resolve_model
from opennua.runtime._ops import AnswerOp, EndOp, FlushOp, PromptOp, RunOp
from opennua.runtime._output import check_output, invalid_message, retry_prompt, schema_note
from opennua.runtime._state import ExecState, RunState
from opennua.runtime._tools import Tool
from opennua.runtime._tracing import Spans
from opennua.runtime._writer import StepWriter

StopReason = Literal["cancelled", "max_steps", "deadline_exceeded", "failed"]
#: A `Stop`'s reason as the outcome says it; any other stop (a limit of tokens or cost, a
#: failure) is "failed", with the error's code naming which.
_STOP_REASONS: dict[str, StopReason] = {
    "max_steps": "max_steps",
    "deadline_exceeded": "deadline_exceeded",
}


class AgentLoop:
    """Runs one execution of an agent: from its first prompt, or from its checkpoint.

    `run()` starts a new execution when the journal holds nothing, otherwise resumes it
    (checking the checkpoint's format and snapshot digest) with the `answers` the Host
    accepted since it suspended. It returns `Completed`, `Suspended` or `Stopped`; a
    `OwnershipLost` from the journal propagates and the attempt must stop.
    """

    def __init__(
        self,
        agent: AgentDefinition,
        journal: Journal,
        env: RunEnv,
        *,
        model: Model | None = None,
        limits: Limits | None = None,
        tools: Sequence[Tool] = (),
        client_tools: Sequence[Tool] = (),
        resolve: Callable[[str], Model] = resolve_model,
    ) -> None:
        self.agent = agent
        self.journal = journal
        self.env = env
        self.model = model if model is not None else resolve_model(agent.model)
        self.limits = limits or Limits()
        self._extra_tools = tuple(tools)
        self._client_tools = tuple(client_tools)
        self._resolve = resolve  # a sub-agent's own model (its front matter `model`)
        self._answers: dict[str, Answer] = {}
        self._cancel = CancelScope()
        self.state: ExecState

    # -- entry point ---------------------------------------------------------------------

    async def run(
        self,
        prompt: str | None = None,
        *,
        answers: Mapping[str, Answer] | None = None,
        cancel: asyncio.Event | None = None,
    ) -> Outcome:
        self._answers = dict(answers or {})
        if cancel is not None:
            self._cancel = CancelScope(cancel)
        async with AsyncExitStack() as stack:
            tools = [*self.agent.tools, *self._extra_tools]
            unavailable: list[tuple[str, McpUnavailable]] = []
            for server in self.agent.mcp_servers:
                try:
                    tools.extend(
                        await connect_mcp(
                            stack,
                            server,
                            cwd=self.env.workdir,
                            sandbox=self.env.sandbox,
                            gateway=self.env.gateway,
                        )
                    )
                except McpUnavailable as exc:
                    if server.required:
                        raise RuntimeFailure(
                            f"{exc.message}\n(the deployment requires this server)", code=exc.code
                        ) from exc
                    unavailable.append((server.name, exc))
            tools.extend(a2a_tool(a, self.env.gateway) for a in self.agent.a2a_agents)
            taken = sorted({t.name for t in tools} & {t.name for t in self._client_tools})
            if taken:
                # Never offer the model two tools of one name, nor drop the client's quietly.
                raise RuntimeFailure(
                    f"the client's tools are named like the agent's: {', '.join(taken)}",
                    code="client_tool_conflict",
                )
            self._tool_map = {
                **self.agent.governed(tools),
                **{t.name: t for t in self._client_tools},
            }
            self._writer = await self._load()
            try:
                await self._report_unavailable(unavailable)
                return await self._run(prompt)
            finally:
                await self._writer.abandon()

    async def _load(self) -> StepWriter:
        stored = await self.journal.load()
        digest = self.agent.digest
        if stored is not None:
            state = decode(
                stored.full,
                stored.steps,
                snapshot_digest=digest,
                root_run_id=self.env.root_run_id,
                equivalent=self.agent.equivalent_digests,
            )
            full_bytes, step_bytes = len(stored.full or b""), sum(len(p) for _, p in stored.steps)
        else:
            state = ExecState(root_run_id=self.env.root_run_id, snapshot_digest=digest)
            full_bytes = step_bytes = 0
        self.state = state
        writer = StepWriter(
            self.journal,
            state,
            self.limits,
            self.env.clock,
            full_bytes=full_bytes,
            step_bytes=step_bytes,
        )
        budget = Budget(self.limits, self.env.wall_clock)
        self._spans = Spans(self.env.trace, self.agent.name, self.model, writer)
        self._model_calls = ModelCalls(
            self.agent,
            self.model,
            self.limits,
            self.env,
            writer,
            self._cancel,
            self._tool_map,
            budget,
            self._resolve,
            self._spans,
        )
        self._tool_calls = ToolCalls(
            self.agent,
            self.limits,
            self.env,
            writer,
            self._cancel,
            self._tool_map,
            self._model_calls,
            budget,
        )
        return writer

    async def _report_unavailable(self, unavailable: list[tuple[str, McpUnavailable]]) -> None:
        """One bad server does not sink the turn: the user sees which and why (an action on
        the turn; a resumed attempt's same report is the same action), the model a note in
        its instructions."""
        if not unavailable:
            return
        root = self.env.root_run_id
        for name, exc in unavailable:
            data = pa.McpServerUnavailable(server=name, code=exc.code, message=exc.message[-4096:])
            await self._writer.push(RuntimeEvent(f"{root}/mcp/{name}/unavailable", root, data))
        await self._writer.flush()
        notes = []
        for name, exc in unavailable:
            reason = exc.message.splitlines()[0][:300]
            notes.append(f"- {name}: {reason}")
        self._model_calls.note = (
            "These MCP servers are unavailable in this turn, so their tools are missing; "
            "say so if the task needs them:\n" + "\n".join(notes)
        )

    async def _run(self, prompt: str | None) -> Outcome:
        try:
            if not self.state.runs:
                await self._open(prompt)  # its hooks may stop the turn before it starts
            await self._drive(self.state.runs[self.state.root_run_id], depth=0)
        except Suspend as s:
            await self._writer.flush()
            await self._writer.settle()
            return Suspended((s.request_id,), self.state.step_no)
        except Cancelled:
            await self._end_all("cancelled", None)
            await self._writer.settle()
            return Stopped("cancelled", None, self.state.usage_total())
        except Stop as s:
            reason = _STOP_REASONS.get(s.reason, "failed")
            error = pa.ErrorInfo(code=s.code, message=s.message) if s.code else None
            await self._end_all(reason, error)
            await self._writer.settle()
            return Stopped(reason, error, self.state.usage_total())
        await self._writer.flush()
        await self._writer.settle()
        root = self.state.runs[self.state.root_run_id]
        output, schema = root.output or "", self.agent.output_schema
        if schema is None:
            return Completed(output, self.state.usage_total())
        # Checked when the run ended (else it would not have); read again here, the same
        # way, so a resumed attempt that finds the run ended returns the same result.
        result = check_output(output, schema).value
        return Completed(output, self.state.usage_total(), result=result, structured=True)

    async def _open(self, prompt: str | None) -> None:
        if prompt is None:
            raise ValueError("a new execution needs a prompt")
        prompt = await self._submitted(prompt)
        root = self.env.root_run_id
        instructions = self.agent.instructions
        if self.agent.output_schema is not None:
            instructions = f"{instructions}\n\n{schema_note(self.agent.output_schema)}"
        self._writer.apply(RunOp(run=root, prompt=prompt, instructions=instructions))
        self._model_calls.issue(self.state.runs[root])
        await self._writer.commit([])

    async def _submitted(self, prompt: str) -> str:
        """The prompt after the plugin's SessionStart and UserPromptSubmit hooks: their
        context added, or `Stop` when a hook blocks it. They run before the execution's
        first commit: a crash before it runs them again, nothing after it does."""
        hooks = self.agent.hooks
        if hooks is None:
            return prompt
        base = {"session_id": self.env.execution_id}
        sandbox, workdir = self.env.sandbox, self.env.workdir
        started = await self._cancel.race(
            hooks.run(
                "SessionStart", {**base, "source": "startup"}, sandbox=sandbox, workdir=workdir
            )
        )
        submitted = await self._cancel.race(
            hooks.run(
                "UserPromptSubmit", {**base, "prompt": prompt}, sandbox=sandbox, workdir=workdir
            )
        )
        if submitted.blocked:
            raise Stop(
                "failed", "blocked_by_hook", f"a hook blocked the prompt: {submitted.reason}"
            )
        return "\n\n".join([prompt, *started.context, *submitted.context])

    async def _stop_hook(self, run: RunState, output: str) -> str | None:
        """A Stop hook's reason to keep working (None: the run may end)."""
        hooks = self.agent.hooks
        if hooks is None or run.parent_run_id is not None or not hooks.matching("Stop"):
            return None
        # The request before this response was a Stop hook's prompt: say so, as Claude
        # Code does, so a hook can let the agent stop instead of looping.
        before = run.messages[-2] if len(run.messages) >= 3 else None
        active = isinstance(before, ModelRequest) and all(
            isinstance(p, UserPromptPart) for p in before.parts
        )
        payload = {
            "session_id": self.env.execution_id,
            "stop_hook_active": active,
            "last_assistant_message": output,
        }
        verdict = await self._cancel.race(
            hooks.run("Stop", payload, sandbox=self.env.sandbox, workdir=self.env.workdir)
        )
        if not verdict.blocked or not self._model_calls.can_issue():
            return None
        return verdict.reason

    async def _unfit(self, run: RunState, output: str, events: list[RuntimeEvent]) -> str | None:
        """The retry prompt when the root run's final answer does not fit the output schema
        (None: it fits, or there is none). Out of retries, the answer is committed as it
        is and the turn fails with `output_invalid`."""
        schema = self.agent.output_schema
        if schema is None or run.parent_run_id is not None:
            return None
        checked = check_output(output, schema)
        if checked.valid:
            return None
        if run.output_retries < self.agent.output_retries and self._model_calls.can_issue():
            return retry_prompt(checked.errors)
        await self._writer.commit(events)
        raise Stop("failed", "output_invalid", invalid_message(checked.errors, run.output_retries))

    # -- driving runs ----------------------------------------------------------------------

    async def _drive(self, run: RunState, depth: int) -> None:
        """Advance `run` until it ends; raises `Suspend` when it waits for a person."""
        async with self._spans.run(run, self._writer.settle):
            await self._advance(run, depth)

    async def _advance(self, run: RunState, depth: int) -> None:
        while run.status == "running":
            self._cancel.check()
            if run.waiting is not None:
                answer = self._answers.get(run.waiting.request_id)
                if answer is None:
                    raise Suspend(run.waiting.request_id)
                self._writer.apply(
                    AnswerOp(
                        run=run.run_id,
                        reason=run.waiting.reason,
                        option_id=answer.option_id,
                        payload=answer.payload,
                    )
                )
                continue
            call = run.current
            if call is not None:
                with self._spans.tool(run, call):
                    if run.child is None:
                        await self._tool_calls.handle(run, call, depth)
                    if run.child is not None and run.current is call:
                        # A sub-agent: driven inside its `task` call's span.
                        child = self.state.runs[run.child]
                        await self._drive(child, depth + 1)
                        await self._tool_calls.finish_task(run, call, child)
                continue
            if run.calls:
                self._writer.apply(FlushOp(run=run.run_id))
                continue
            await self._model_step(run, depth)

    async def _model_step(self, run: RunState, depth: int) -> None:
        response, events = await self._model_calls.respond(run, depth)
        ledger: list[LedgerOp] = []
        if not run.calls:
            output = "".join(p.content for p in response.parts if isinstance(p, TextPart))
            going_on = await self._stop_hook(run, output)
            if going_on is not None:
                self._writer.apply(PromptOp(run=run.run_id, prompt=going_on))
                self._model_calls.issue(run)
            elif (retry := await self._unfit(run, output, events)) is not None:
                self._writer.apply(PromptOp(run=run.run_id, prompt=retry, output_retry=True))
                self._model_calls.issue(run)
            else:
                self._writer.apply(EndOp(run=run.run_id, status="completed", output=output))
        else:
            events += self._tool_calls.ride(run, ledger)
        await self._writer.commit(events, ledger)

    # -- ending ----------------------------------------------------------------------------

    async def _end_all(self, reason: StopReason, error: pa.ErrorInfo | None) -> None:
        """Leave a consistent state when the execution stops early: the open message closed,
        the running call marked, every open run and worker ended."""
        events: list[RuntimeEvent] = []
        ledger: list[LedgerOp] = []
        status: Literal["cancelled", "failed"] = "cancelled" if reason == "cancelled" else "failed"
        streaming = self._model_calls.streaming
        if streaming is not None:
            events += self._model_calls.interrupted(streaming[0])
        for run in self.state.runs.values():
            if run.status != "running":
                continue
            if run.issued and (streaming is None or streaming[0] is not run):
                events += self._model_calls.interrupted(run)
            for call in run.calls[run.next_call :]:
                update = pa.ToolCallUpdated(tool_call_id=call.call_id, status=status)
                if run.child is None and run.started and call is run.current:
                    # It may have had effects before it was killed: say so, don't guess.
                    update = pa.ToolCallUpdated(
                        tool_call_id=call.call_id,
                        status="unknown",
                        error=pa.ErrorInfo(
                            code="outcome_unknown", message="the turn ended while it ran"
                        ),
                    )
                    ledger.append(LedgerOp("unknown", call.call_id, call.name))
                events.append(
                    RuntimeEvent(f"{run.run_id}/{call.call_id}/{status}", run.run_id, update)
                )
            if run.parent_run_id is not None:
                events.append(
                    RuntimeEvent(
                        f"{run.run_id}/worker.ended",
                        run.parent_run_id,
                        pa.WorkerEnded(worker_run_id=run.run_id, status=status),
                    )
                )
            self._writer.apply(EndOp(run=run.run_id, status=status, output=None))
        self._model_calls.streaming = None
        await self._writer.commit(events, ledger)
