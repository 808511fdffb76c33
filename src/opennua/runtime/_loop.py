"""The agent loop: model responses and tool calls as checkpointed steps.

Every durable change goes through `_commit`: the events of the step, the ops that change
the state (the checkpoint step) and the ledger ops, in one journal commit. State changes
are applied live by the same `apply` a resume replays, so the two cannot drift. The next
step's opening facts (the next tool's ledger `started`, the next model call's
`message.started`) ride in the commit that ends the current step: one commit per step.

Commits are pipelined through one journal writer (`_drain`): `_commit` queues the step and
the loop goes on computing the next one while the writer waits on the disk; steps queued
meanwhile land together in the writer's next commit (group commit: one transaction, their
checkpoint ops merged into one step record). The loop waits for every queued step to be
durable (`_settle`) before anything that needs it: a delta emit, a tool that is not
idempotent (its ledger `started` rides in a queued step) and returning an outcome. Only an
idempotent tool runs ahead of its `started` record; a crash then re-runs it with the same
key, which is its contract. The queue is bounded, so the loop never runs far ahead.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Mapping, Sequence
from contextlib import AsyncExitStack, suppress
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_ai.messages import (
    InstructionPart,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.tools import ToolDefinition

from opennua.protocol import actions as pa
from opennua.runtime._agent import AgentDefinition
from opennua.runtime._calls import CallsMixin, _Cancelled, _Stop, _Suspend
from opennua.runtime._env import (
    Answer,
    Completed,
    Limits,
    Outcome,
    RunEnv,
    Stopped,
    Suspended,
)
from opennua.runtime._journal import CheckpointRecord, Journal, LedgerOp
from opennua.runtime._mcp import connect_mcp
from opennua.runtime._models import resolve_model
from opennua.runtime._pending import Step, merge_steps
from opennua.runtime._state import (
    ExecState,
    Op,
    RunState,
    apply,
    decode,
    dump_message,
    encode_full,
    encode_step,
)
from opennua.runtime._tools import Tool
from opennua.runtime.events import RuntimeEvent

T = TypeVar("T")
#: A full checkpoint is written once the steps since the last one reach this many times its
#: (compressed) size: a resume reads at most (1 + this) times a full's size, and the fulls
#: written add up to a bounded multiple of the history (each one ~3x the one before).
_COMPACT_FACTOR = 2
#: Steps queued behind the commit in flight before the loop waits for the disk.
_MAX_QUEUED = 64


class AgentLoop(CallsMixin):
    """Runs one execution of an agent: from its first prompt, or from its checkpoint.

    `run()` starts a new execution when the journal holds nothing, otherwise resumes it
    (checking the checkpoint's format and snapshot digest) with the `answers` the Host
    accepted since it suspended. It returns `Completed`, `Suspended` or `Stopped`; a
    `Fenced` from the journal propagates and the attempt must stop.
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
    ) -> None:
        self.agent = agent
        self.journal = journal
        self.env = env
        self.model = model if model is not None else resolve_model(agent.model)
        self.limits = limits or Limits()
        self._extra_tools = tuple(tools)
        self._tools: dict[str, Tool] = {}
        self._ops: list[Op] = []
        self._buf: list[RuntimeEvent] = []
        self._buf_t0 = 0.0
        self._fresh: set[str] = set()  # runs whose issued model call this attempt opened
        self._started_here: set[str] = set()  # calls this attempt wrote `started` for
        self._checked: dict[str, dict[str, Any]] = {}
        self._answers: dict[str, Answer] = {}
        self._cancel = asyncio.Event()
        self._since_full = 0
        self._last_full = 0
        self._streaming: tuple[RunState, str, str] | None = None  # run, message id, key
        self._running_call: tuple[RunState, str] | None = None
        self._queued: list[Step] = []
        self._writer: asyncio.Future[None] | None = None
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
            self._cancel = cancel
        async with AsyncExitStack() as stack:
            tools = [*self.agent.tools, *self._extra_tools]
            for server in self.agent.mcp_servers:
                tools.extend(await connect_mcp(stack, server))
            self._tools = {t.name: t for t in tools}
            try:
                return await self._run(prompt)
            finally:
                await self._abandon()

    async def _run(self, prompt: str | None) -> Outcome:
        await self._open(prompt)
        root = self.state.runs[self.state.root_run_id]
        try:
            await self._drive(root, depth=0)
        except _Suspend as s:
            await self._flush()
            await self._settle()
            return Suspended((s.request_id,), self.state.step_no)
        except _Cancelled:
            await self._end_all("cancelled", None)
            await self._settle()
            return Stopped("cancelled", None, self.state.usage_total())
        except _Stop as s:
            error = pa.ErrorInfo(code=s.code, message=s.message) if s.code else None
            await self._end_all(s.reason, error)
            await self._settle()
            return Stopped(s.reason, error, self.state.usage_total())  # type: ignore[arg-type]
        await self._flush()
        await self._settle()
        return Completed(root.output or "", self.state.usage_total())

    async def _open(self, prompt: str | None) -> None:
        stored = await self.journal.load()
        digest = self.agent.digest
        if stored is not None:
            self.state = decode(
                stored.full,
                stored.steps,
                snapshot_digest=digest,
                root_run_id=self.env.root_run_id,
            )
            self._last_full = _COMPACT_FACTOR * len(stored.full or b"")
            self._since_full = sum(len(p) for _, p in stored.steps)
            return
        if prompt is None:
            raise ValueError("a new execution needs a prompt")
        self.state = ExecState(root_run_id=self.env.root_run_id, snapshot_digest=digest)
        root = self.env.root_run_id
        self._op(self._run_op(root, None, None, "agent", "", prompt, self.agent.instructions))
        events = self._issue(self.state.runs[root])
        await self._commit(events)

    # -- durable writes ------------------------------------------------------------------

    def _op(self, op: Op, live: Any = None) -> None:
        apply(self.state, op, live)
        self._ops.append(op)

    def _event(self, key: str, run_id: str, data: BaseModel) -> RuntimeEvent:
        return RuntimeEvent(key=key, run_id=run_id, data=data)

    async def _settle(self) -> None:
        """Wait until every queued step is durable; a failed commit (e.g. `Fenced`) is
        raised here."""
        writer = self._writer
        if writer is not None:
            await writer
            self._writer = None

    async def _poll(self) -> None:
        """Let the writer reach the journal; if it already ended, settle it, so a failed
        commit stops the loop before it starts more work."""
        if self._writer is not None:
            await asyncio.sleep(0)
            if self._writer.done():
                await self._settle()

    async def _abandon(self) -> None:
        # Leaving with an error while steps are queued: let them land (they are valid
        # steps) without raising over the error already propagating.
        writer, self._writer = self._writer, None
        if writer is not None:
            with suppress(BaseException):
                await writer

    async def _drain(self) -> None:
        """The one writer: commits whatever is queued, in order, until the queue is empty."""
        while self._queued:
            batch, self._queued = self._queued, []
            events, checkpoints, ledger = merge_steps(batch)
            await self.journal.commit(events, checkpoints, ledger)

    async def _commit(self, events: list[RuntimeEvent], ledger: Sequence[LedgerOp] = ()) -> None:
        await self._flush()
        ops, self._ops = self._ops, []
        step_no = self.state.step_no + 1
        digest = self.state.snapshot_digest if step_no == 1 else None
        payload = encode_step(self.state, ops, digest=digest)
        full = None
        self._since_full += len(payload)
        if step_no > 1 and self._since_full >= max(self._last_full, self.limits.compact_min_bytes):
            self.state.step_no = step_no
            full = encode_full(self.state)
            self._last_full, self._since_full = _COMPACT_FACTOR * len(full), 0
        if len(self._queued) >= _MAX_QUEUED:
            await self._settle()
        self._queued.append(Step(events, CheckpointRecord(step_no, payload, full), ledger))
        writer = self._writer
        if writer is None or writer.done():
            if writer is not None:
                writer.result()  # a failed commit stops the loop here
            self._writer = asyncio.ensure_future(self._drain())
        self.state.step_no = step_no

    async def _push(self, event: RuntimeEvent) -> None:
        if not self._buf:
            self._buf_t0 = self.env.clock()
        self._buf.append(event)
        if (
            len(self._buf) >= self.limits.delta_batch_size
            or self.env.clock() - self._buf_t0 >= self.limits.delta_batch_seconds
        ):
            await self._flush()

    async def _flush(self) -> None:
        if self._buf:
            batch, self._buf = self._buf, []
            await self._settle()
            await self.journal.emit(batch)

    # -- cancellation ----------------------------------------------------------------------

    def _check_cancel(self) -> None:
        if self._cancel.is_set():
            raise _Cancelled()

    async def _race(self, work: Awaitable[T]) -> T:
        """Await `work` unless cancel fires first; then cancel it (a shell tool kills its
        process group as it unwinds) and raise `_Cancelled`."""
        self._check_cancel()
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self._cancel.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with suppress(BaseException):
            await task
        raise _Cancelled()

    # -- driving runs ----------------------------------------------------------------------

    async def _drive(self, run: RunState, depth: int) -> None:
        """Advance `run` until it ends; raises `_Suspend` when it waits for a person."""
        while run.status == "running":
            self._check_cancel()
            if run.waiting is not None:
                answer = self._answers.get(run.waiting["request_id"])
                if answer is None:
                    raise _Suspend(run.waiting["request_id"])
                self._op(
                    {
                        "op": "answer",
                        "run": run.run_id,
                        "answer": {
                            "reason": run.waiting["reason"],
                            "option_id": answer.option_id,
                            "payload": answer.payload,
                        },
                    }
                )
                continue
            call = run.current
            if call is not None:
                if run.child is not None:
                    child = self.state.runs[run.child]
                    await self._drive(child, depth + 1)
                    await self._finish_task(run, call, child)
                else:
                    await self._handle_call(run, call, depth)
                continue
            if run.calls:
                self._op({"op": "flush", "run": run.run_id})
                continue
            await self._model_step(run, depth)

    def _can_issue(self) -> bool:
        if self.state.model_calls >= self.limits.max_steps:
            return False
        total = self.state.usage_total()
        tokens = total["input_tokens"] + total["output_tokens"]
        return self.limits.max_tokens is None or tokens < self.limits.max_tokens

    def _check_limits(self) -> None:
        if self.state.model_calls >= self.limits.max_steps:
            raise _Stop("max_steps", "max_steps", f"reached {self.limits.max_steps} model steps")
        if not self._can_issue():
            raise _Stop("failed", "max_tokens", f"reached {self.limits.max_tokens} tokens")

    def _mid(self, run: RunState, n: int | None = None) -> tuple[str, str]:
        """The message id and key prefix of run's current model call, try `n`."""
        key = f"{run.run_id}/s{run.step}/m{n if n is not None else run.issued}"
        return self.env.ids("message", key), key

    def _issue(self, run: RunState) -> list[RuntimeEvent]:
        """Open the next model call of `run`: state first, so its ids are in the checkpoint."""
        self._op({"op": "issue", "run": run.run_id, "n": run.issued + 1})
        self._fresh.add(run.run_id)
        mid, key = self._mid(run)
        return [
            self._event(
                f"{key}/started", run.run_id, pa.MessageStarted(message_id=mid, role="assistant")
            )
        ]

    def _request_params(self, depth: int) -> ModelRequestParameters:
        tools = [
            ToolDefinition(
                name=t.name, description=t.description, parameters_json_schema=t.parameters_schema
            )
            for t in self._tools.values()
            if not (t.name == "task" and depth >= self.agent.max_depth)
        ]
        instructions = self.agent.instructions if depth == 0 else self.agent.worker_instructions
        return ModelRequestParameters(
            function_tools=tools,
            allow_text_output=True,
            instruction_parts=[InstructionPart(instructions)],
        )

    async def _model_step(self, run: RunState, depth: int) -> None:
        self._check_limits()
        if run.issued == 0 or run.run_id not in self._fresh:
            events: list[RuntimeEvent] = []
            if run.issued > 0:
                # A call a crashed attempt opened: close its message, then re-issue as new.
                mid, key = self._mid(run)
                events.append(
                    self._event(
                        f"{key}/interrupted",
                        run.run_id,
                        pa.MessageCompleted(message_id=mid, text="", status="interrupted"),
                    )
                )
            events += self._issue(run)
            await self._commit(events)
        mid, key = self._mid(run)
        self._streaming = (run, mid, key)
        response = await self._race(self._stream(run, depth, mid, key))
        self._streaming = None
        self._fresh.discard(run.run_id)
        await self._commit_response(run, response, mid, key)

    async def _stream(self, run: RunState, depth: int, mid: str, key: str) -> ModelResponse:
        params = self._request_params(depth)
        counters = {"d": 0, "r": 0}
        async with self.model.request_stream(list(run.messages), None, params) as stream:
            async for ev in stream:
                text = reasoning = ""
                if isinstance(ev, PartStartEvent):
                    if isinstance(ev.part, TextPart):
                        text = ev.part.content
                    elif isinstance(ev.part, ThinkingPart):
                        reasoning = ev.part.content
                elif isinstance(ev, PartDeltaEvent):
                    if isinstance(ev.delta, TextPartDelta):
                        text = ev.delta.content_delta
                    elif isinstance(ev.delta, ThinkingPartDelta):
                        reasoning = ev.delta.content_delta or ""
                if text:
                    data: BaseModel = pa.MessageDelta(message_id=mid, delta=text)
                    await self._push(self._event(f"{key}/d{counters['d']}", run.run_id, data))
                    counters["d"] += 1
                if reasoning:
                    data = pa.ReasoningDelta(message_id=mid, delta=reasoning)
                    await self._push(self._event(f"{key}/r{counters['r']}", run.run_id, data))
                    counters["r"] += 1
            return stream.get()

    async def _commit_response(
        self, run: RunState, response: ModelResponse, mid: str, key: str
    ) -> None:
        rid = run.run_id
        text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
        thinking = "".join(p.content for p in response.parts if isinstance(p, ThinkingPart))
        events: list[RuntimeEvent] = []
        if thinking:
            events.append(
                self._event(
                    f"{key}/reasoning", rid, pa.ReasoningCompleted(message_id=mid, text=thinking)
                )
            )
        events.append(
            self._event(
                f"{key}/completed",
                rid,
                pa.MessageCompleted(message_id=mid, text=text, status="complete"),
            )
        )
        u = response.usage
        usage = {
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cache_read_input_tokens": u.cache_read_tokens,
            "cache_creation_input_tokens": u.cache_write_tokens,
            "reasoning_output_tokens": u.output_reasoning_tokens,
        }
        events.append(
            self._event(
                f"{key}/usage",
                rid,
                pa.UsageRecorded(
                    provider=self.model.system,
                    # The model the provider says it served (a dated snapshot, for pricing).
                    model=response.model_name or self.model.model_name,
                    **usage,
                ),
            )
        )
        calls = []
        for i, part in enumerate(p for p in response.parts if isinstance(p, ToolCallPart)):
            # Keyed by step, not by try: only one response per step is ever committed.
            call_id = self.env.ids("call", f"{rid}/s{run.step}/t{i}")
            calls.append(
                {
                    "call_id": call_id,
                    "provider_id": part.tool_call_id,
                    "name": part.tool_name,
                    "args": part.args,
                }
            )
            tool = self._tools.get(part.tool_name)
            events.append(
                self._event(
                    f"{rid}/{call_id}/started",
                    rid,
                    pa.ToolCallStarted(
                        tool_call_id=call_id,
                        name=part.tool_name,
                        title=tool.title if tool else part.tool_name,
                        kind=tool.kind if tool else "other",
                        input=_input_json(part.args),
                    ),
                )
            )
        self._op(
            {
                "op": "response",
                "run": rid,
                "message": dump_message(response),
                "calls": calls,
                "usage": usage,
            },
            live=response,
        )
        ledger: list[LedgerOp] = []
        if not calls:
            self._op({"op": "end", "run": rid, "status": "completed", "output": text})
        else:
            events += self._ride(run, ledger)
        await self._commit(events, ledger)

    # -- ending ----------------------------------------------------------------------------

    async def _end_all(self, reason: str, error: pa.ErrorInfo | None) -> None:
        """Leave a consistent state when the execution stops early: the open message closed,
        the running call marked, every open run and worker ended."""
        events: list[RuntimeEvent] = []
        ledger: list[LedgerOp] = []
        status = "cancelled" if reason == "cancelled" else "failed"
        if self._streaming is not None:
            run, mid, key = self._streaming
            events.append(
                self._event(
                    f"{key}/interrupted",
                    run.run_id,
                    pa.MessageCompleted(message_id=mid, text="", status="interrupted"),
                )
            )
        for run in self.state.runs.values():
            if run.status != "running":
                continue
            if run.issued and (self._streaming is None or self._streaming[0] is not run):
                mid, key = self._mid(run)
                events.append(
                    self._event(
                        f"{key}/interrupted",
                        run.run_id,
                        pa.MessageCompleted(message_id=mid, text="", status="interrupted"),
                    )
                )
            for call in run.calls[run.next_call :]:
                if run.child is not None and call is run.current:
                    continue
                events.append(
                    self._event(
                        f"{run.run_id}/{call.call_id}/{status}",
                        run.run_id,
                        pa.ToolCallUpdated(tool_call_id=call.call_id, status=status),
                    )  # type: ignore[arg-type]
                )
                if run.started and call is run.current:
                    # It may have had effects before it was killed: say so, don't guess.
                    ledger.append(LedgerOp("unknown", call.call_id, call.name))
            if run.parent_run_id is not None:
                events.append(
                    self._event(
                        f"{run.run_id}/worker.ended",
                        run.parent_run_id,
                        pa.WorkerEnded(worker_run_id=run.run_id, status=status),  # type: ignore[arg-type]
                    )
                )
            self._op({"op": "end", "run": run.run_id, "status": status, "output": None})
        self._streaming = None
        await self._commit(events, ledger)


def _input_json(args: str | dict[str, Any] | None) -> Any:
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args
