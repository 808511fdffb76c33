"""Scripted models: deterministic, offline models on pydantic-ai's `FunctionModel`.

A script is a list of `ScriptStep`s (one per model response) or a function of the message
history. The step a response plays is derived from the history itself (how many responses
it already holds), so a run resumed in a new process continues the script where it was.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.models.function import (
    AgentInfo,
    DeltaThinkingPart,
    DeltaToolCall,
    FunctionModel,
    FunctionStreamedResponse,
)
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import RequestUsage

from opennua.runtime._tools import CLIENT_TOOL_METADATA


@dataclass(frozen=True)
class ScriptCall:
    name: str
    args: dict[str, Any]
    id: str | None = None


@dataclass(frozen=True)
class ScriptStep:
    """One scripted model response: optional reasoning, text (streamed in chunks), tool calls."""

    text: str = ""
    reasoning: str = ""
    calls: Sequence[ScriptCall] = ()
    usage: RequestUsage | None = None
    #: Raw JSON arguments for the calls, to script invalid JSON; defaults to `json.dumps(args)`.
    raw_args: Sequence[str | None] = field(default=())


def call(name: str, /, **args: Any) -> ScriptCall:
    return ScriptCall(name, args)


def say(text: str, *, reasoning: str = "", usage: RequestUsage | None = None) -> ScriptStep:
    return ScriptStep(text=text, reasoning=reasoning, usage=usage)


def calls(*items: ScriptCall, text: str = "", reasoning: str = "") -> ScriptStep:
    return ScriptStep(text=text, reasoning=reasoning, calls=items)


ScriptFn = Callable[[list[ModelMessage]], ScriptStep]
#: A script that also sees the names of the tools the request offers (`sees_tools`).
ToolScriptFn = Callable[[list[ModelMessage], Sequence[str]], ScriptStep]
#: A script for turns whose client offers tools of its own: it is given them.
ClientScriptFn = Callable[[list[ModelMessage], Sequence[ToolDefinition]], ScriptStep]


def first_prompt(messages: Sequence[ModelMessage]) -> str:
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, UserPromptPart) and isinstance(p.content, str):
                    return p.content
    return ""


def _chunks(text: str, size: int = 3) -> list[str]:
    """Split into groups of `size` words, keeping whitespace, so streaming is deterministic."""
    words = text.split(" ")
    out = [" ".join(words[i : i + size]) for i in range(0, len(words), size)]
    return [c + (" " if i < len(out) - 1 else "") for i, c in enumerate(out)]


def default_usage(messages: Sequence[ModelMessage], step: ScriptStep) -> RequestUsage:
    """Deterministic usage that looks like a real provider's: the prompt grows with the
    history, and all but the newest message hit the prompt cache."""
    history = sum(
        len(str(getattr(p, "content", "") or getattr(p, "args", "")))
        for m in messages
        for p in m.parts
    )
    input_tokens = 120 + history // 4
    out = max(
        1,
        (len(step.text) + len(step.reasoning) + sum(len(json.dumps(c.args)) for c in step.calls))
        // 4,
    )
    reasoning = len(step.reasoning) // 4
    cached = (input_tokens * 3) // 4 if len(messages) > 1 else 96
    return RequestUsage(
        input_tokens=input_tokens,
        output_tokens=out + reasoning,
        cache_read_tokens=cached,
        cache_write_tokens=input_tokens - cached,
        output_reasoning_tokens=reasoning,
    )


@dataclass
class _ScriptedStream(FunctionStreamedResponse):
    _script_usage: RequestUsage = field(default_factory=RequestUsage)
    _provider: str = "scripted"

    @property
    def usage(self) -> RequestUsage:
        return self._script_usage

    def get(self) -> ModelResponse:
        # FunctionStreamedResponse names no provider (its `provider_name` is typed None);
        # a scripted response says it was scripted.
        return dataclasses.replace(super().get(), provider_name=self._provider)


class ScriptedModel(FunctionModel):
    """A model that plays a script. `workers` maps a sub-agent's task text to its own script.
    `client_script` plays instead of the script when the client offers tools of its own
    (the root run of a turn with client tools), and is given them.

    `provider` and `model_name` are what its responses say served them: a test that needs
    its usage priced names a real pair (`openai`, `gpt-4o`); nothing is ever sent.
    """

    def __init__(
        self,
        script: Sequence[ScriptStep] | ScriptFn | ToolScriptFn,
        *,
        workers: Mapping[str, Sequence[ScriptStep] | ScriptFn] | None = None,
        model_name: str = "scripted",
        provider: str = "scripted",
        step_delay: float = 0.0,
        sees_tools: bool = False,
        client_script: ClientScriptFn | None = None,
    ) -> None:
        super().__init__(self._respond, stream_function=self._stream_items, model_name=model_name)
        self._system = provider
        self._script = script
        self._workers = dict(workers or {})
        self._client_script = client_script
        self.step_delay = step_delay
        #: The script is a `ToolScriptFn`: it is told the tools offered.
        self._sees_tools = sees_tools

    def step_for(
        self, messages: list[ModelMessage], tools: Sequence[ToolDefinition] = ()
    ) -> ScriptStep:
        script = self._workers.get(first_prompt(messages), self._script)
        client = [t for t in tools if t.metadata == CLIENT_TOOL_METADATA]
        if client and self._client_script is not None and script is self._script:
            return self._client_script(messages, client)
        if callable(script):
            if self._sees_tools and script is self._script:
                return script(messages, [t.name for t in tools])  # type: ignore[call-arg]
            return script(messages)  # type: ignore[call-arg]
        index = sum(isinstance(m, ModelResponse) for m in messages)
        if index >= len(script):
            return ScriptStep(text="(the script has no more steps)")
        return script[index]

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = self.step_for(messages, info.function_tools)
        parts: list[Any] = []
        if step.reasoning:
            parts.append(ThinkingPart(step.reasoning))
        if step.text:
            parts.append(TextPart(step.text))
        for i, c in enumerate(step.calls):
            parts.append(ToolCallPart(c.name, self._args(step, i), tool_call_id=c.id or f"sc{i}"))
        return ModelResponse(parts=parts, usage=step.usage or default_usage(messages, step))

    @staticmethod
    def _args(step: ScriptStep, i: int) -> str:
        raw = step.raw_args[i] if i < len(step.raw_args) else None
        return raw if raw is not None else json.dumps(step.calls[i].args)

    def _stream_items(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        return self._items(self.step_for(messages, info.function_tools))

    async def _items(self, step: ScriptStep) -> AsyncIterator[Any]:
        # With a step delay, chunks come a tenth of it apart, as a provider's tokens do: a
        # client sees text stream in, not only the completed message.
        pause = self.step_delay / 10
        if step.reasoning:
            for chunk in _chunks(step.reasoning):
                yield {0: DeltaThinkingPart(content=chunk)}
                if pause:
                    await asyncio.sleep(pause)
        if step.text:
            for chunk in _chunks(step.text):
                yield chunk
                if pause:
                    await asyncio.sleep(pause)
        for i, c in enumerate(step.calls):
            yield {i + 1: DeltaToolCall(c.name, self._args(step, i), tool_call_id=c.id or f"sc{i}")}
        if not (step.reasoning or step.text or step.calls):
            yield ""

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncIterator[StreamedResponse]:
        model_settings, params = self.prepare_request(model_settings, model_request_parameters)
        if self.step_delay:
            await asyncio.sleep(self.step_delay)
        step = self.step_for(messages, params.function_tools)
        stream = _ScriptedStream(
            model_request_parameters=params,
            _model_name=self.model_name,
            _iter=self._items(step),
            _script_usage=step.usage or default_usage(messages, step),
            _provider=self._system,
        )
        try:
            yield stream
        finally:
            await stream._iter.aclose()  # type: ignore[attr-defined]
