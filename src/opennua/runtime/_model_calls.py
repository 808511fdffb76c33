"""Model calls inside the loop: opening one, streaming it, retrying what a provider fails at,
and the facts of its response.

A call is opened (`issue`) in a commit before it is sent, so its message id is in the
checkpoint and a crash re-issues it as a new message. Its message is started only when
text comes: a response that only thinks and calls tools (most steps of an agent) is no
message, and two actions a step fewer (docs/runtime.md, "A response without text is no
message"). A provider failure worth retrying (rate limit, 5xx, timeout, lost connection)
is retried here, visibly: the turn's state says `model_retry` until a retried request
answers; deltas already streamed close their message `interrupted` and the retry opens a
new one, exactly as a resume after a crash does.

Model output is made safe before it becomes an event or checkpoint bytes: lone surrogates
(which no UTF-8 encoder accepts) become U+FFFD in text, reasoning and tool calls.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

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
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition

from opennua._common import json_value
from opennua.protocol import actions as pa
from opennua.protocol import timestamp
from opennua.runtime._agent import AgentDefinition
from opennua.runtime._budget import Budget
from opennua.runtime._control import Cancelled, CancelScope, Stop
from opennua.runtime._env import Limits, RunEnv
from opennua.runtime._events import RuntimeEvent
from opennua.runtime._ops import IssueOp, OpenOp, ResponseOp
from opennua.runtime._retry import ModelFailure, classify, retry_delay
from opennua.runtime._state import RunState, tool_calls, usage_of
from opennua.runtime._tools import CLIENT_TOOL_METADATA, Tool
from opennua.runtime._tracing import Spans
from opennua.runtime._writer import StepWriter

_SURROGATES = re.compile("[\ud800-\udfff]")


class ModelCalls:
    def __init__(
        self,
        agent: AgentDefinition,
        model: Model,
        limits: Limits,
        env: RunEnv,
        writer: StepWriter,
        cancel: CancelScope,
        tools: Mapping[str, Tool],
        budget: Budget,
        resolve: Callable[[str], Model],
        spans: Spans,
    ) -> None:
        self._agent = agent
        self._spans = spans
        self._model = model
        self._resolve = resolve
        self._models: dict[str, Model] = {}  # sub-agents' own models, by model string
        #: Said to the model after the instructions (which MCP servers are unavailable).
        self.note = ""
        self.budget = budget
        self._limits = limits
        self._env = env
        self._writer = writer
        self._cancel = cancel
        self._tools = tools
        #: (sub-agent, depth) -> the tool definitions such a run is offered.
        self._offered: dict[tuple[str | None, int], list[ToolDefinition]] = {}
        # The provider SDK does not retry: this loop does, where clients can see it.
        self._settings = ModelSettings(timeout=limits.model_timeout, max_retries=0)
        self._fresh: set[str] = set()  # runs whose issued model call this attempt opened
        #: The call being streamed: its run, message id and key prefix.
        self.streaming: tuple[RunState, str, str] | None = None

    # -- opening -------------------------------------------------------------------------

    def can_issue(self) -> bool:
        return self.budget.can_issue(self._writer.state)

    def model_for(self, run: RunState) -> Model:
        """The run's model: its sub-agent's own (front matter `model`), or the agent's."""
        sub = self._agent.subagent(run.agent) if run.agent is not None else None
        if sub is None or sub.model is None or sub.model == self._agent.model:
            return self._model
        if sub.model not in self._models:
            self._models[sub.model] = self._resolve(sub.model)
        return self._models[sub.model]

    def message(self, run: RunState, n: int | None = None) -> tuple[str, str]:
        """The message id and key prefix of run's current model call, try `n`."""
        key = f"{run.run_id}/s{run.step}/m{n if n is not None else run.issued}"
        return self._env.ids("message", key), key

    def issue(self, run: RunState) -> None:
        """Open the next model call of `run` in the next commit, so its ids are in the
        checkpoint before it is sent."""
        self._writer.apply(IssueOp(run=run.run_id, n=run.issued + 1))
        self._fresh.add(run.run_id)

    def _opening(self, run: RunState) -> tuple[OpenOp, RuntimeEvent]:
        """The current try's opening: its op and its `message.started`."""
        mid, key = self.message(run)
        started = pa.MessageStarted(message_id=mid, role="assistant")
        return OpenOp(run=run.run_id), RuntimeEvent(f"{key}/started", run.run_id, started)

    def interrupted(self, run: RunState) -> list[RuntimeEvent]:
        """Close run's open message, if its text had begun: what streamed of it is all
        there will be."""
        if not run.opened:
            return []
        mid, key = self.message(run)
        closed = pa.MessageCompleted(message_id=mid, text="", status="interrupted")
        return [RuntimeEvent(f"{key}/interrupted", run.run_id, closed)]

    # -- one call ------------------------------------------------------------------------

    async def respond(self, run: RunState, depth: int) -> tuple[ModelResponse, list[RuntimeEvent]]:
        """Get the model's next response for `run` and apply it; returns it and its events
        (the caller commits them, with what rides along)."""
        self.budget.check_model_call(self._writer.state)
        if run.issued == 0 or run.run_id not in self._fresh:
            # A call a crashed attempt opened is closed, then re-issued as a new message.
            events = self.interrupted(run) if run.issued > 0 else []
            self.issue(run)
            await self._writer.commit(events)
        retries = 0
        while True:
            mid, key = self.message(run)
            self.streaming = (run, mid, key)
            streamed = [0, 0]  # text and reasoning deltas pushed
            try:
                with self._spans.chat(run, mid, key, self._instructions(run, depth)) as record:
                    response = await self._cancel.race(
                        self._stream(run, depth, mid, key, streamed, retries)
                    )
                    record(response)
                break
            except Cancelled:
                raise
            except Exception as exc:
                failure = classify(exc, now=self._env.wall_clock())
                if failure is None:
                    raise
                retries += 1
                if not failure.retryable or retries >= self._limits.model_attempts:
                    raise Stop("failed", failure.code, failure.message) from exc
                await self._wait_to_retry(run, failure, retries, reissue=any(streamed))
        self.streaming = None
        self._fresh.discard(run.run_id)
        response = clean_response(response)
        return response, self._recorded(run, response, mid, key)

    async def _wait_to_retry(
        self, run: RunState, failure: ModelFailure, retry: int, *, reissue: bool
    ) -> None:
        delay = retry_delay(failure, retry, self._limits, self._env.jitter())
        events = []
        if reissue:
            events = self.interrupted(run)
            self.issue(run)
        _, key = self.message(run)
        state = pa.TurnState(
            state="running",
            model_retry=pa.ModelRetry(
                attempt=retry,
                retry_at=timestamp(self._env.wall_clock() + delay),
                error=pa.ErrorInfo(code=failure.code, message=failure.message),
            ),
        )
        events.append(RuntimeEvent(f"{key}/retry{retry}", run.run_id, state))
        await self._writer.commit(events)
        await self._writer.settle()  # seen before the wait, not after it
        await self._cancel.race(self._env.sleep(delay))

    def _request_params(self, run: RunState, depth: int) -> ModelRequestParameters:
        # An attempt's tools are fixed when it starts, so what a run is offered is built
        # once per sub-agent and depth, not per model call (~1 % of a busy server's time).
        offered = (run.agent, depth)
        tools = self._offered.get(offered)
        if tools is None:
            tools = self._offered[offered] = [
                ToolDefinition(
                    name=t.name,
                    description=t.description,
                    parameters_json_schema=t.parameters_schema,
                    # Said to no provider; scripted models read it (`ScriptedModel.client_script`).
                    metadata=CLIENT_TOOL_METADATA if t.client else None,
                )
                for t in self._agent.offered(self._tools, run.agent, depth).values()
            ]
        return ModelRequestParameters(
            function_tools=list(tools),
            allow_text_output=True,
            instruction_parts=[InstructionPart(self._instructions(run, depth))],
        )

    def _instructions(self, run: RunState, depth: int) -> str:
        """The root's instructions; a named sub-agent's own; else the worker default; then
        the note of this attempt, if any."""
        if depth == 0:
            text = self._agent.instructions
        else:
            sub = self._agent.subagent(run.agent) if run.agent is not None else None
            text = sub.instructions if sub is not None else self._agent.worker_instructions
        return f"{text}\n\n{self.note}" if self.note else text

    async def _stream(
        self, run: RunState, depth: int, mid: str, key: str, streamed: list[int], retries: int
    ) -> ModelResponse:
        params = self._request_params(run, depth)
        rid = run.run_id
        writer = self._writer
        model = self.model_for(run)
        async with model.request_stream(list(run.messages), self._settings, params) as stream:
            if retries:
                # The retried request was answered: the turn no longer waits to retry.
                answered = pa.TurnState(state="running", model_retry=None)
                await writer.push(RuntimeEvent(f"{key}/retried{retries}", rid, answered))
                await writer.flush()
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
                    if not run.opened:
                        # With its first deltas, in a commit: a resume knows to close it.
                        await writer.start_message(*self._opening(run))
                    data: BaseModel = pa.MessageDelta(message_id=mid, delta=clean_text(text))
                    await writer.push(RuntimeEvent(f"{key}/d{streamed[0]}", rid, data))
                    streamed[0] += 1
                if reasoning:
                    data = pa.ReasoningDelta(message_id=mid, delta=clean_text(reasoning))
                    await writer.push(RuntimeEvent(f"{key}/r{streamed[1]}", rid, data))
                    streamed[1] += 1
            return stream.get()

    def _recorded(
        self, run: RunState, response: ModelResponse, mid: str, key: str
    ) -> list[RuntimeEvent]:
        """Apply the response; its events: reasoning, message (if it has text), usage, each
        call started."""
        rid = run.run_id
        text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
        thinking = "".join(p.content for p in response.parts if isinstance(p, ThinkingPart))
        events: list[RuntimeEvent] = []
        if thinking:
            data: BaseModel = pa.ReasoningCompleted(message_id=mid, text=thinking)
            events.append(RuntimeEvent(f"{key}/reasoning", rid, data))
        if text or run.opened:
            if not run.opened:  # its text did not stream: it starts and completes at once
                events.append(self._opening(run)[1])
            data = pa.MessageCompleted(message_id=mid, text=text, status="complete")
            events.append(RuntimeEvent(f"{key}/completed", rid, data))
        model = self.model_for(run)
        usage = pa.UsageRecorded(
            provider=model.system,
            # The model the provider says it served (a dated snapshot, for pricing).
            model=response.model_name or model.model_name,
            **usage_of(response),
        )
        events.append(RuntimeEvent(f"{key}/usage", rid, usage))
        call_ids = []
        for i, part in enumerate(tool_calls(response)):
            # Keyed by step, not by try: only one response per step is ever committed.
            call_id = self._env.ids("call", f"{rid}/s{run.step}/t{i}")
            call_ids.append(call_id)
            tool = self._tools.get(part.tool_name)
            started = pa.ToolCallStarted(
                tool_call_id=call_id,
                name=part.tool_name,
                title=tool.title if tool else part.tool_name,
                kind=tool.kind if tool else "other",
                input=_input_json(part),
            )
            events.append(RuntimeEvent(f"{rid}/{call_id}/started", rid, started))
        self._writer.apply(ResponseOp(run=rid, message=response, calls=tuple(call_ids)))
        return events


def _input_json(part: ToolCallPart) -> Any:
    args = part.args
    if isinstance(args, str):
        try:
            return json_value(args)
        except ValueError:
            return args
    if isinstance(args, dict) or args is None:
        return args
    return part.args_as_dict()


# -- safe text --------------------------------------------------------------------------------


def clean_text(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD."""
    if text.isascii():
        return text
    return _SURROGATES.sub("\ufffd", text)


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_clean(v) for v in value)
    return value


def _cleaned(obj: Any) -> Any:
    """A dataclass with every string in its (init) fields made safe; `obj` itself when
    nothing changed."""
    changes = {}
    for f in dataclasses.fields(obj):
        if not f.init or f.name == "parts":
            continue
        value = getattr(obj, f.name)
        if isinstance(value, str | dict | list | tuple):
            cleaned = _clean(value)
            if cleaned != value or type(cleaned) is not type(value):
                changes[f.name] = cleaned
    return dataclasses.replace(obj, **changes) if changes else obj


def _clean_json_text(text: str) -> str:
    """JSON text (a tool call's arguments) whose strings hold no lone surrogate, escaped
    (`\\ud800`, as providers send them) or not."""
    text = clean_text(text)
    if "\\ud" not in text.lower():
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text  # not JSON: the call is invalid anyway, and this text is ASCII-safe
    cleaned = _clean(value)
    return text if cleaned == value else json.dumps(cleaned)


def _safe_part(part: Any) -> Any:
    part = _cleaned(part)
    if isinstance(part, ToolCallPart) and isinstance(part.args, str):
        args = _clean_json_text(part.args)
        if args != part.args:
            part = dataclasses.replace(part, args=args)
    return part


def clean_response(response: ModelResponse) -> ModelResponse:
    """`response` with no lone surrogate in its text, reasoning, tool calls or metadata."""
    parts = [_safe_part(p) for p in response.parts]
    if any(new is not old for new, old in zip(parts, response.parts, strict=True)):
        response = dataclasses.replace(response, parts=parts)
    cleaned: ModelResponse = _cleaned(response)
    return cleaned
