"""Tool calls inside the loop: approval, the ledger, reconciliation after a crash, running a
tool, recording its result, and sub-agents (`task`) as nested runs."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_ai.messages import RetryInfo, ToolReturnPart

from opennua.protocol import actions as pa
from opennua.runtime._env import APPROVE, RETRY, SKIP, Limits, RunEnv
from opennua.runtime._journal import LedgerOp
from opennua.runtime._state import ExecState, Op, PendingCall, RunState, encode_part
from opennua.runtime._tools import InputRequired, Tool, ToolContext, validation_message
from opennua.runtime.errors import ToolError
from opennua.runtime.events import RuntimeEvent

if TYPE_CHECKING:
    from opennua.runtime._agent import AgentDefinition

T = TypeVar("T")
PREVIEW_CHARS = 2000


class _Cancelled(Exception):
    pass


class _Stop(Exception):
    def __init__(self, reason: str, code: str | None = None, message: str = "") -> None:
        super().__init__(message)
        self.reason, self.code, self.message = reason, code, message


class _Suspend(Exception):
    def __init__(self, request_id: str) -> None:
        super().__init__(request_id)
        self.request_id = request_id


class CallsMixin:
    agent: AgentDefinition
    env: RunEnv
    limits: Limits
    state: ExecState
    _tools: dict[str, Tool]
    _started_here: set[str]
    _checked: dict[str, dict[str, Any]]  # arguments `_ride` validated, by call id
    _cancel: asyncio.Event

    # provided by AgentLoop
    def _op(self, op: Op, live: Any = None) -> None: ...
    def _event(self, key: str, run_id: str, data: BaseModel) -> RuntimeEvent: ...
    async def _commit(
        self, events: list[RuntimeEvent], ledger: Sequence[LedgerOp] = ()
    ) -> None: ...
    async def _race(self, work: Awaitable[T]) -> T: ...
    def _check_cancel(self) -> None: ...
    async def _settle(self) -> None: ...
    async def _poll(self) -> None: ...
    def _issue(self, run: RunState) -> list[RuntimeEvent]: ...
    def _can_issue(self) -> bool: ...

    @staticmethod
    def _run_op(
        run_id: str,
        parent: str | None,
        parent_call: str | None,
        name: str,
        task: str,
        prompt: str,
        instructions: str,
    ) -> Op:
        return {
            "op": "run",
            "run": run_id,
            "parent": parent,
            "parent_call": parent_call,
            "name": name,
            "task": task,
            "prompt": prompt,
            "instructions": instructions,
        }

    def _tool_for(self, call: PendingCall, depth: int) -> Tool | None:
        if call.name == "task" and depth >= self.agent.max_depth:
            return None
        return self._tools.get(call.name)

    def _updated(
        self, run: RunState, call: PendingCall, suffix: str, **fields: Any
    ) -> RuntimeEvent:
        return self._event(
            f"{run.run_id}/{call.call_id}/{suffix}",
            run.run_id,
            pa.ToolCallUpdated(tool_call_id=call.call_id, **fields),
        )

    # -- one call ------------------------------------------------------------------------

    async def _handle_call(self, run: RunState, call: PendingCall, depth: int) -> None:
        tool = self._tool_for(call, depth)
        try:
            if tool is None:
                raise ValueError(f"unknown tool {call.name!r}")
            args = self._checked.pop(call.call_id, None) or tool.validate(call.args)
        except (ValidationError, ValueError) as exc:
            await self._invalid_call(run, call, exc)
            return
        answer = run.answer or {}
        if call.name == "task":
            await self._start_task(run, call, args)
            return
        if run.started and call.call_id not in self._started_here:
            # `started` by an attempt that died before `completed`: it may or may not have
            # had its effect. Idempotent tools re-run under the same key; others ask.
            if answer.get("reason") == "confirmation":
                if answer.get("option_id") != RETRY:
                    await self._record(run, call, tool, None, skipped=True)
                    return
                await self._start(run, call, suffix=f"running@{self.state.step_no}")
            elif not tool.idempotent:
                await self._confirm(run, call)
                return
        elif tool.requires_approval and answer.get("reason") != "tool_call":
            await self._ask_approval(run, call, tool)
            return
        elif tool.requires_approval and answer.get("option_id") != APPROVE:
            await self._record(run, call, tool, None, denied=True)
            return
        elif not run.started:
            await self._start(run, call)
        if tool.idempotent:
            await self._poll()
        else:
            await self._settle()  # its ledger `started` must be durable before it runs
        await self._execute(run, call, tool, args)

    async def _start(self, run: RunState, call: PendingCall, suffix: str = "running") -> None:
        self._op({"op": "start", "run": run.run_id})
        self._started_here.add(call.call_id)
        await self._commit(
            [self._updated(run, call, suffix, status="in_progress")],
            [LedgerOp("start", call.call_id, call.name)],
        )

    async def _wait(
        self,
        run: RunState,
        call: PendingCall,
        reason: str,
        event: BaseModel,
        key: str,
        ledger: Sequence[LedgerOp] = (),
        extra: Sequence[RuntimeEvent] = (),
    ) -> None:
        request_id = event.request_id  # type: ignore[attr-defined]
        self._op(
            {
                "op": "wait",
                "run": run.run_id,
                "request_id": request_id,
                "reason": reason,
                "call_id": call.call_id,
            }
        )
        await self._commit([*extra, self._event(key, run.run_id, event)], ledger)
        raise _Suspend(request_id)

    async def _ask_approval(self, run: RunState, call: PendingCall, tool: Tool) -> None:
        key = f"{run.run_id}/{call.call_id}/approval"
        request = pa.InputRequestOpened(
            request_id=self.env.ids("request", key),
            reason="tool_call",
            tool_call_id=call.call_id,
            prompt=f"Allow {tool.title}?",
            options=[
                pa.PermissionOption(option_id=APPROVE, name="Allow", kind="allow_once"),
                pa.PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
            ],
        )
        await self._wait(run, call, "tool_call", request, key)

    async def _confirm(self, run: RunState, call: PendingCall) -> None:
        key = f"{run.run_id}/{call.call_id}/confirm@{self.state.step_no}"
        request = pa.InputRequestOpened(
            request_id=self.env.ids("request", key),
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
            f"unknown@{self.state.step_no}",
            status="unknown",
            error=pa.ErrorInfo(code="outcome_unknown", message="interrupted before it completed"),
        )
        ledger = [LedgerOp("unknown", call.call_id, call.name)]
        await self._wait(run, call, "confirmation", request, key, ledger, [unknown])

    async def _invalid_call(self, run: RunState, call: PendingCall, exc: Exception) -> None:
        message = (
            validation_message(exc) if isinstance(exc, ValidationError | ValueError) else str(exc)
        )
        retries = run.retries + 1
        if retries > self.limits.max_tool_retries:
            raise _Stop(
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
                max_retries=self.limits.max_tool_retries,
            ),  # type: ignore[arg-type]
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
        ctx = ToolContext(
            workspace=self.env.workspace,
            run_id=run.run_id,
            tool_call_id=call.call_id,
            idempotency_key=call.call_id,
            artifacts=self.env.artifacts,
            cancel=self._cancel,
            answer=(run.answer or {}).get("payload")
            if (run.answer or {}).get("reason") == "input_required"
            else None,
            shell_env=dict(self.env.shell_env) if self.env.shell_env is not None else {},
        )
        self._running_call = (run, call.call_id)
        try:
            if inspect.iscoroutinefunction(tool.fn):
                value: Any = await self._race(tool.call(ctx, args))
            else:
                # A plain function runs to its end on this thread: nothing could interrupt
                # it, so racing it against cancel would only cost two tasks per call.
                self._check_cancel()
                value = await tool.call(ctx, args)
        except InputRequired as req:
            key = f"{run.run_id}/{call.call_id}/input"
            request = pa.InputRequestOpened(
                request_id=self.env.ids("request", key),
                reason="input_required",
                tool_call_id=call.call_id,
                prompt=req.prompt,
                response_schema=req.response_schema,
            )
            await self._wait(run, call, "input_required", request, key)
            return
        except (ToolError, Exception) as exc:
            if isinstance(exc, _Cancelled):
                raise
            await self._record(run, call, tool, None, error=exc, reported=ctx.reported)
            return
        finally:
            self._running_call = None
        await self._record(run, call, tool, value, reported=ctx.reported)

    async def _record(
        self,
        run: RunState,
        call: PendingCall,
        tool: Tool,
        value: Any,
        *,
        error: Exception | None = None,
        denied: bool = False,
        skipped: bool = False,
        reported: Sequence[BaseModel] = (),
        before: Sequence[RuntimeEvent] = (),
    ) -> None:
        rid = run.run_id
        events = [*before] + [
            self._event(f"{rid}/{call.call_id}/fact{i}", rid, data)
            for i, data in enumerate(reported)
        ]
        for data in reported:
            if isinstance(data, pa.PlanUpdated):
                self._op(
                    {"op": "plan", "run": rid, "entries": [e.model_dump() for e in data.entries]}
                )
        if error is not None or denied or skipped:
            if denied:
                code, message, outcome = "rejected", "The user rejected this tool call.", "denied"
            elif skipped:
                code, message, outcome = (
                    "skipped",
                    "Skipped: the user chose not to run it again.",
                    "failed",
                )
            else:
                assert error is not None
                code = error.code if isinstance(error, ToolError) else "tool_exception"
                message = (
                    error.message
                    if isinstance(error, ToolError)
                    else f"{type(error).__name__}: {error}"
                )
                outcome = "failed"
            part = ToolReturnPart(
                tool_name=call.name, content=message, tool_call_id=call.provider_id, outcome=outcome
            )  # type: ignore[arg-type]
            events.append(
                self._updated(
                    run,
                    call,
                    "result",
                    status="failed",
                    error=pa.ErrorInfo(code=code, message=message[:2000]),
                )
            )
        else:
            text = value if isinstance(value, str) else json.dumps(value)
            part = ToolReturnPart(tool_name=call.name, content=text, tool_call_id=call.provider_id)
            data = text.encode()
            if len(data) > pa.INLINE_OUTPUT_LIMIT:
                # Large outputs go by reference: the full text in the blob store, a preview inline.
                sha = await self.env.artifacts.put(
                    data, name=f"{call.call_id}.txt", media_type="text/plain"
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
        ledger = [] if call.name == "task" else [LedgerOp("complete", call.call_id, call.name)]
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
        op: Op = {"op": "result", "run": run.run_id, "part": encode_part(part)}
        if retries:
            op["retries"] = retries
        self._op(op, live=part)
        events += self._ride(run, ledger)
        await self._commit(events, ledger)

    def _ride(self, run: RunState, ledger: list[LedgerOp]) -> list[RuntimeEvent]:
        """Open the step that follows in the same commit: the next call's ledger `started`
        when it can run without asking anyone, or the next model call."""
        call = run.current
        if call is None:
            if not run.calls or not self._can_issue():
                return []
            self._op({"op": "flush", "run": run.run_id})
            return self._issue(run)
        tool = self._tools.get(call.name)
        if tool is None or call.name == "task" or tool.requires_approval:
            return []
        try:
            self._checked[call.call_id] = tool.validate(call.args)
        except (ValidationError, ValueError):
            return []
        self._op({"op": "start", "run": run.run_id})
        self._started_here.add(call.call_id)
        ledger.append(LedgerOp("start", call.call_id, call.name))
        return [self._updated(run, call, "running", status="in_progress")]

    # -- sub-agents ------------------------------------------------------------------------

    async def _start_task(self, run: RunState, call: PendingCall, args: dict[str, Any]) -> None:
        child_id = self.env.ids("run", f"{call.call_id}/worker")
        self._op(
            self._run_op(
                child_id,
                run.run_id,
                call.call_id,
                args["name"],
                args["task"],
                args["task"],
                self.agent.worker_instructions,
            )
        )
        self._op({"op": "child", "run": run.run_id, "child": child_id})
        events = [
            self._updated(run, call, "running", status="in_progress"),
            self._event(
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
        if self._can_issue():
            events += self._issue(self.state.runs[child_id])
        await self._commit(events)

    async def _finish_task(self, run: RunState, call: PendingCall, child: RunState) -> None:
        status = "completed" if child.status == "completed" else "failed"
        summary = child.output or ""
        ended = self._event(
            f"{child.run_id}/worker.ended",
            run.run_id,
            pa.WorkerEnded(
                worker_run_id=child.run_id, status=status, summary=summary[:2000] or None
            ),  # type: ignore[arg-type]
        )
        tool = self._tools["task"]
        if status == "completed":
            await self._record(run, call, tool, summary, before=[ended])
        else:
            await self._record(
                run, call, tool, None, error=ToolError("the sub-agent failed"), before=[ended]
            )
