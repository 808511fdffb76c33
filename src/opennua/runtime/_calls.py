"""Tool calls inside the loop: approval, the ledger, reconciliation after a crash, running a
tool, recording its result, and sub-agents (`task`) as nested runs."""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ValidationError
from pydantic_ai.messages import RetryInfo, ToolReturnPart

from opennua.plugins import HookEvent
from opennua.protocol import actions as pa
from opennua.runtime._agent import AgentDefinition
from opennua.runtime._budget import Budget
from opennua.runtime._control import Cancelled, CancelScope, Stop, Suspend
from opennua.runtime._env import APPROVE, REJECT, RETRY, SKIP, Limits, RunEnv
from opennua.runtime._errors import ToolError
from opennua.runtime._events import RuntimeEvent
from opennua.runtime._hooks import Verdict, claude_tool_input
from opennua.runtime._journal import LedgerOp
from opennua.runtime._ops import ChildOp, FlushOp, PlanOp, ResultOp, RunOp, StartOp, WaitOp
from opennua.runtime._state import PendingCall, RunState
from opennua.runtime._tools import InputRequired, Tool, ToolContext, validation_message
from opennua.runtime._writer import StepWriter

PREVIEW_CHARS = 2000
ToolOutcome = Literal["success", "failed", "denied"]


class ModelOpener(Protocol):
    """What tool calls need of the model side: opening a run's next model call in the
    commit that records the last result, when the limits still allow one."""

    def can_issue(self) -> bool: ...

    def issue(self, run: RunState) -> None: ...


class ToolCalls:
    def __init__(
        self,
        agent: AgentDefinition,
        limits: Limits,
        env: RunEnv,
        writer: StepWriter,
        cancel: CancelScope,
        tools: Mapping[str, Tool],
        model: ModelOpener,
        budget: Budget,
    ) -> None:
        self._budget = budget
        self._agent = agent
        self._limits = limits
        self._env = env
        self._writer = writer
        self._cancel = cancel
        self._tools = tools
        self._model = model
        self._started_here: set[str] = set()  # calls this attempt wrote `started` for
        self._checked: dict[str, dict[str, Any]] = {}  # arguments `ride` validated, by call

    def _tool_for(self, run: RunState, call: PendingCall, depth: int) -> Tool | None:
        return self._agent.offered(self._tools, run.agent, depth).get(call.name)

    def _updated(
        self, run: RunState, call: PendingCall, suffix: str, **fields: Any
    ) -> RuntimeEvent:
        return RuntimeEvent(
            f"{run.run_id}/{call.call_id}/{suffix}",
            run.run_id,
            pa.ToolCallUpdated(tool_call_id=call.call_id, **fields),
        )

    # -- one call ------------------------------------------------------------------------

    async def handle(self, run: RunState, call: PendingCall, depth: int) -> None:
        """Advance the run's current call by one step (it may suspend the execution)."""
        self._budget.check_tool_call(self._writer.state)
        tool = self._tool_for(run, call, depth)
        try:
            if tool is None:
                raise ValueError(f"unknown tool {call.name!r}")
            args = self._checked.pop(call.call_id, None) or tool.validate(call.args)
        except (ValidationError, ValueError) as exc:
            await self._invalid_call(run, call, exc)
            return
        answer = run.answer
        if call.name == "task":
            await self._start_task(run, call, args)
            return
        if run.started and call.call_id not in self._started_here:
            # `started` by an attempt that died before `completed`: it may or may not have
            # had its effect. Idempotent tools re-run under the same key; others ask.
            if answer is not None and answer.reason == "confirmation":
                if answer.option_id != RETRY:
                    await self._record(run, call, None, skipped=True)
                    return
                await self._start(run, call, suffix=f"running@{self._writer.state.step_no}")
            elif not tool.idempotent:
                await self._confirm(run, call)
                return
        else:
            asked = answer is not None and answer.reason == "tool_call"
            if asked and answer is not None and answer.option_id != APPROVE:
                await self._record(run, call, None, denied=True)
                return
            if not asked and not run.started:
                # PreToolUse hooks run once, before anyone is asked: a call that was
                # asked about had passed them (the answer is in the checkpoint).
                verdict = await self._pre_tool_use(run, call, args)
                if verdict.blocked:
                    await self._record(run, call, None, blocked=verdict.reason)
                    return
                if tool.requires_approval or verdict.ask:
                    await self._ask_approval(run, call, tool)
                    return
            if not run.started:
                await self._start(run, call)
        if tool.idempotent:
            await self._writer.poll()
        else:
            await self._writer.settle()  # its ledger `started` must be durable before it runs
        await self._execute(run, call, tool, args)

    def _hooked(self, event: HookEvent, name: str) -> bool:
        hooks = self._agent.hooks
        return hooks is not None and bool(hooks.matching(event, name))

    async def _hook(self, event: HookEvent, call: PendingCall, payload: dict[str, Any]) -> Verdict:
        hooks = self._agent.hooks
        if hooks is None:
            return Verdict()
        base = {"session_id": self._env.execution_id, "tool_use_id": call.call_id}
        return await self._cancel.race(
            hooks.run(
                event,
                {**base, **payload},
                sandbox=self._env.sandbox,
                workdir=self._env.workdir,
                tool=call.name,
            )
        )

    async def _pre_tool_use(
        self, run: RunState, call: PendingCall, args: dict[str, Any]
    ) -> Verdict:
        if not self._hooked("PreToolUse", call.name):
            return Verdict()
        return await self._hook("PreToolUse", call, {"tool_input": claude_tool_input(args)})

    async def _post_tool_use(self, call: PendingCall, args: dict[str, Any], value: Any) -> Any:
        """The result the model gets: the tool's, with what PostToolUse hooks said after it
        (a block's reason, added context)."""
        if not self._hooked("PostToolUse", call.name):
            return value
        text = value if isinstance(value, str) else json.dumps(value)
        payload = {"tool_input": claude_tool_input(args), "tool_response": text}
        verdict = await self._hook("PostToolUse", call, payload)
        notes = [*verdict.block, *verdict.context]
        if not notes:
            return value
        return "\n\n".join([text, *(f"[PostToolUse hook] {n}" for n in notes)])

    async def _start(self, run: RunState, call: PendingCall, suffix: str = "running") -> None:
        self._writer.apply(StartOp(run=run.run_id))
        self._started_here.add(call.call_id)
        await self._writer.commit(
            [self._updated(run, call, suffix, status="in_progress")],
            [LedgerOp("start", call.call_id, call.name)],
        )

    async def _wait(
        self,
        run: RunState,
        call: PendingCall,
        request: pa.InputRequestOpened,
        key: str,
        ledger: Sequence[LedgerOp] = (),
        extra: Sequence[RuntimeEvent] = (),
    ) -> None:
        self._writer.apply(
            WaitOp(
                run=run.run_id,
                request_id=request.request_id,
                reason=request.reason,
                call_id=call.call_id,
            )
        )
        await self._writer.commit([*extra, RuntimeEvent(key, run.run_id, request)], ledger)
        raise Suspend(request.request_id)

    async def _ask_approval(self, run: RunState, call: PendingCall, tool: Tool) -> None:
        key = f"{run.run_id}/{call.call_id}/approval"
        request = pa.InputRequestOpened(
            request_id=self._env.ids("request", key),
            reason="tool_call",
            tool_call_id=call.call_id,
            prompt=f"Allow {tool.title}?",
            options=[
                pa.PermissionOption(option_id=APPROVE, name="Allow", kind="allow_once"),
                pa.PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"),
            ],
        )
        await self._wait(run, call, request, key)

    async def _confirm(self, run: RunState, call: PendingCall) -> None:
        step_no = self._writer.state.step_no
        key = f"{run.run_id}/{call.call_id}/confirm@{step_no}"
        request = pa.InputRequestOpened(
            request_id=self._env.ids("request", key),
            reason="confirmation",
            tool_call_id=call.call_id,
            prompt=(
                f"`{call.name}` was running when the agent stopped; it may or may not have "
                "taken effect. Run it again?"
            ),
            options=[
                pa.PermissionOption(option_id=RETRY, name="Run again", kind="allow_once"),
                pa.PermissionOption(option_id=SKIP, name="Skip it", kind="reject_once"),
            ],
        )
        unknown = self._updated(
            run,
            call,
            f"unknown@{step_no}",
            status="unknown",
            error=pa.ErrorInfo(code="outcome_unknown", message="interrupted before it completed"),
        )
        ledger = [LedgerOp("unknown", call.call_id, call.name)]
        await self._wait(run, call, request, key, ledger, [unknown])

    async def _invalid_call(
        self, run: RunState, call: PendingCall, exc: ValidationError | ValueError
    ) -> None:
        message = validation_message(exc)
        retries = run.retries + 1
        if retries > self._limits.max_tool_retries:
            raise Stop(
                "failed",
                "tool_retries_exhausted",
                f"{retries - 1} invalid tool calls in a row; last: {message}",
            )
        part = ToolReturnPart(
            tool_name=call.name,
            content=message + " Fix the arguments and call the tool again.",
            tool_call_id=call.provider_id,
            outcome="retried",
            retry=RetryInfo(
                "validation_error" if isinstance(exc, ValidationError) else "unknown_tool",
                attempt=retries,
                max_retries=self._limits.max_tool_retries,
            ),
        )
        event = self._updated(
            run,
            call,
            "result",
            status="failed",
            error=pa.ErrorInfo(code="invalid_arguments", message=message),
        )
        await self._commit_result(run, call, part, [event], retries=retries)

    # -- running -------------------------------------------------------------------------

    async def _execute(
        self, run: RunState, call: PendingCall, tool: Tool, args: dict[str, Any]
    ) -> None:
        answer = run.answer
        given = answer.payload if answer is not None and answer.reason == "input_required" else None
        ctx = ToolContext(
            workdir=self._env.workdir,
            run_id=run.run_id,
            tool_call_id=call.call_id,
            idempotency_key=call.call_id,
            artifacts=self._env.artifacts,
            cancel=self._cancel.event,
            answer=given,
            shell_env=dict(self._env.shell_env) if self._env.shell_env is not None else {},
            sandbox=self._env.sandbox,
        )
        try:
            if inspect.iscoroutinefunction(tool.fn):
                value: Any = await self._cancel.race(tool.call(ctx, args))
            else:
                # A plain function runs to its end on this thread: nothing could interrupt
                # it, so racing it against cancel would only cost two tasks per call.
                self._cancel.check()
                value = await tool.call(ctx, args)
        except InputRequired as req:
            key = f"{run.run_id}/{call.call_id}/input"
            request = pa.InputRequestOpened(
                request_id=self._env.ids("request", key),
                reason="input_required",
                tool_call_id=call.call_id,
                prompt=req.prompt,
                response_schema=req.response_schema,
            )
            await self._wait(run, call, request, key)
            return
        except Cancelled:
            raise
        except Exception as exc:
            await self._record(run, call, None, error=exc, reported=ctx.reported)
            return
        value = await self._post_tool_use(call, args, value)
        await self._record(run, call, value, reported=ctx.reported)

    async def _record(
        self,
        run: RunState,
        call: PendingCall,
        value: Any,
        *,
        error: Exception | None = None,
        denied: bool = False,
        skipped: bool = False,
        blocked: str | None = None,
        reported: Sequence[BaseModel] = (),
        before: Sequence[RuntimeEvent] = (),
    ) -> None:
        rid = run.run_id
        events = [*before] + [
            RuntimeEvent(f"{rid}/{call.call_id}/fact{i}", rid, data)
            for i, data in enumerate(reported)
        ]
        for data in reported:
            if isinstance(data, pa.PlanUpdated):
                self._writer.apply(
                    PlanOp(run=rid, entries=tuple(e.model_dump() for e in data.entries))
                )
        if error is not None or denied or skipped or blocked is not None:
            outcome: ToolOutcome = "failed"
            if denied:
                code, message, outcome = "rejected", "The user rejected this tool call.", "denied"
            elif blocked is not None:
                code, outcome = "blocked_by_hook", "denied"
                message = f"A PreToolUse hook blocked this call: {blocked}"
            elif skipped:
                code, message = "skipped", "Skipped: the user chose not to run it again."
            elif isinstance(error, ToolError):
                code, message = error.code, error.message
            else:
                code, message = "tool_exception", f"{type(error).__name__}: {error}"
            part = ToolReturnPart(
                tool_name=call.name, content=message, tool_call_id=call.provider_id, outcome=outcome
            )
            events.append(
                self._updated(
                    run,
                    call,
                    "result",
                    status="rejected" if denied else "failed",
                    error=pa.ErrorInfo(code=code, message=message[:2000]),
                )
            )
        else:
            text = value if isinstance(value, str) else json.dumps(value)
            part = ToolReturnPart(tool_name=call.name, content=text, tool_call_id=call.provider_id)
            raw = text.encode()
            if len(raw) > pa.INLINE_OUTPUT_LIMIT:
                # Large outputs go by reference: the full text in the blob store, a preview inline.
                sha = await self._env.artifacts.put(
                    raw, name=f"{call.call_id}.txt", media_type="text/plain"
                )
                events.append(
                    self._updated(
                        run,
                        call,
                        "result",
                        status="completed",
                        output=text[:PREVIEW_CHARS] + "…",
                        output_ref=f"sha256:{sha}",
                    )
                )
            else:
                events.append(self._updated(run, call, "result", status="completed", output=text))
        # A rejected or blocked call never started: there is no ledger entry to complete.
        never_started = call.name == "task" or denied or blocked is not None
        ledger = [] if never_started else [LedgerOp("complete", call.call_id, call.name)]
        await self._commit_result(run, call, part, events, ledger=ledger)

    async def _commit_result(
        self,
        run: RunState,
        call: PendingCall,
        part: ToolReturnPart,
        events: list[RuntimeEvent],
        *,
        retries: int = 0,
        ledger: list[LedgerOp] | None = None,
    ) -> None:
        ledger = list(ledger or [])
        self._writer.apply(ResultOp(run=run.run_id, part=part, retries=retries))
        events += self.ride(run, ledger)
        await self._writer.commit(events, ledger)

    def ride(self, run: RunState, ledger: list[LedgerOp]) -> list[RuntimeEvent]:
        """Open the step that follows in the same commit: the next call's ledger `started`
        when it can run without asking anyone, or the next model call."""
        call = run.current
        if call is None:
            if not run.calls or not self._model.can_issue():
                return []
            self._writer.apply(FlushOp(run=run.run_id))
            self._model.issue(run)
            return []
        if self._budget.spent(self._writer.state) is not None:
            return []  # the call will not run: no ledger `started` for it
        tool = self._agent.offered(self._tools, run.agent, depth=0).get(call.name)
        if tool is None or call.name == "task" or tool.requires_approval:
            return []
        if self._hooked("PreToolUse", call.name):
            return []  # its hooks run first, in `handle`
        try:
            self._checked[call.call_id] = tool.validate(call.args)
        except (ValidationError, ValueError):
            return []
        self._writer.apply(StartOp(run=run.run_id))
        self._started_here.add(call.call_id)
        ledger.append(LedgerOp("start", call.call_id, call.name))
        return [self._updated(run, call, "running", status="in_progress")]

    # -- sub-agents ------------------------------------------------------------------------

    async def _start_task(self, run: RunState, call: PendingCall, args: dict[str, Any]) -> None:
        child_id = self._env.ids("run", f"{call.call_id}/worker")
        sub = self._agent.subagent(args["name"])
        self._writer.apply(
            RunOp(
                run=child_id,
                parent=run.run_id,
                parent_call=call.call_id,
                name=args["name"],
                task=args["task"],
                prompt=args["task"],
                instructions=sub.instructions if sub else self._agent.worker_instructions,
                agent=sub.name if sub else None,
            )
        )
        self._writer.apply(ChildOp(run=run.run_id, child=child_id))
        events = [
            self._updated(run, call, "running", status="in_progress"),
            RuntimeEvent(
                f"{child_id}/worker.started",
                run.run_id,
                pa.WorkerStarted(
                    worker_run_id=child_id,
                    parent_run_id=run.run_id,
                    parent_tool_call_id=call.call_id,
                    name=args["name"],
                    task=args["task"],
                ),
            ),
        ]
        if self._model.can_issue():
            self._model.issue(self._writer.state.runs[child_id])
        await self._writer.commit(events)

    async def finish_task(self, run: RunState, call: PendingCall, child: RunState) -> None:
        """Record the `task` call's result once its sub-agent run has ended."""
        completed = child.status == "completed"
        summary = child.output or ""
        ended = RuntimeEvent(
            f"{child.run_id}/worker.ended",
            run.run_id,
            pa.WorkerEnded(
                worker_run_id=child.run_id,
                status="completed" if completed else "failed",
                summary=summary[:2000] or None,
            ),
        )
        if completed:
            await self._record(run, call, summary, before=[ended])
        else:
            error = ToolError("the sub-agent failed")
            await self._record(run, call, None, error=error, before=[ended])
