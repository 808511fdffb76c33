"""OpenTelemetry spans of an execution, in the GenAI semantic conventions.

`invoke_agent` per run (the root agent and each sub-agent), `chat` per model request,
`execute_tool` per tool call; a sub-agent's `invoke_agent` is a child of its parent's
`execute_tool task`. Every span carries the `opennua.*` attributes of its attempt (session,
turn, execution, attempt, client of the intent) and its run. Each request also records the
GenAI histograms `gen_ai.client.token.usage` and `gen_ai.client.operation.duration`.

The chat spans are ours, not pydantic-ai's `InstrumentedModel`: that one converts the whole
message history on every request even with content off (measured: a 200-step loop ran
3.3x slower traced), where this records the response's facts only. With content enabled,
the messages are converted by pydantic-ai's own `messages_to_otel_messages`, in its format.

Off is the default and costs nothing: with no `TraceScope` in the `RunEnv` every context
manager here returns at once. Content (prompts, completions, tool arguments) is recorded
only when `Tracing.include_content` says so.
"""

from __future__ import annotations

import contextvars
import functools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models import Model
from pydantic_ai.models.instrumented import InstrumentationSettings

from opennua.runtime._control import Suspend
from opennua.runtime._state import PendingCall, RunState, usage_of

#: `(trace_id, span_id)` the next new span must take (the id generator of `nua serve`
#: honours it): the turn span's ids were fixed when the turn was accepted, before any span.
pinned_ids: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "opennua_pinned_ids", default=None
)

_PROPAGATOR = TraceContextTextMapPropagator()

#: The protocol's usage fields under their OpenTelemetry GenAI attribute names.
USAGE_ATTRIBUTES = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cache_read_input_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_creation_input_tokens": "gen_ai.usage.cache_creation.input_tokens",
    "reasoning_output_tokens": "gen_ai.usage.reasoning.output_tokens",
}


#: The bucket boundaries the GenAI semantic conventions advise (seconds, tokens).
_DURATION_BUCKETS = [0.01 * 2**n for n in range(14)]  # 0.01 … 81.92

_TOKEN_BUCKETS = [float(4**n) for n in range(14)]  # 1 … 67108864


@dataclass(frozen=True)
class Tracing:
    """Where an execution's spans and GenAI metrics go, and whether they may hold content.

    No `tracer_provider`: no spans, the GenAI metrics only."""

    tracer_provider: trace.TracerProvider | None = None
    meter_provider: metrics.MeterProvider | None = None
    include_content: bool = False

    @functools.cached_property
    def tracer(self) -> trace.Tracer:
        return (self.tracer_provider or trace.NoOpTracerProvider()).get_tracer("opennua")

    @functools.cached_property
    def operation_duration(self) -> metrics.Histogram:
        meter = (self.meter_provider or metrics.NoOpMeterProvider()).get_meter("opennua")
        return meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )

    @functools.cached_property
    def token_usage(self) -> metrics.Histogram:
        meter = (self.meter_provider or metrics.NoOpMeterProvider()).get_meter("opennua")
        return meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )


def context_of(traceparent: str | None) -> otel_context.Context:
    """The OpenTelemetry context whose (remote) parent span is `traceparent`'s."""
    return _PROPAGATOR.extract({"traceparent": traceparent} if traceparent else {})


def link_to(traceparent: str | None) -> list[Link]:
    """A span link to `traceparent`'s span ([] when there is none or it is invalid)."""
    span = trace.get_current_span(context_of(traceparent))
    ctx = span.get_span_context()
    return [Link(ctx)] if ctx.is_valid else []


@dataclass(frozen=True)
class TraceScope:
    """One attempt's tracing: the turn span it continues and the attributes it adds."""

    tracing: Tracing
    #: W3C `traceparent` of the turn's span (the parent of the root run's span).
    traceparent: str | None
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    #: The action seqs this attempt's commits produced for a run so far (the journal's).
    seqs: Callable[[str], Sequence[int]] = lambda run_id: ()


class Steps(Protocol):
    """What spans need of the step writer: how many steps are queued and durable, and a
    hook called when more became durable."""

    queued_steps: int
    durable_steps: int
    on_durable: Callable[[], None] | None


class Spans:
    """The loop's spans; every method is a no-op without a `TraceScope`.

    A `chat` or `execute_tool` span ends when its work does, but is handed to the exporter
    only once the steps holding its actions are durable, so it can name their seqs (its
    end time is the real one). The root run's span hands over whatever is left.
    """

    def __init__(
        self, scope: TraceScope | None, agent_name: str, model: Model, steps: Steps
    ) -> None:
        self._tracing = scope.tracing if scope is not None else None
        traced = scope is not None and scope.tracing.tracer_provider is not None
        self._scope = scope if traced else None
        self._agent_name = agent_name
        self._provider = model.system
        self._model_name = model.model_name
        self._steps = steps
        #: Ended spans waiting for their steps: (span, end ns, seq group, steps needed).
        self._closing: list[tuple[trace.Span, int, str, int]] = []
        if self._scope is not None:
            steps.on_durable = self._durable

    def _close(self, span: trace.Span, group: str, steps: int) -> None:
        self._closing.append((span, time.time_ns(), group, steps))

    def _durable(self) -> None:
        durable, waiting = self._steps.durable_steps, []
        for item in self._closing:
            if item[3] <= durable:
                self._hand_over(*item[:3])
            else:
                waiting.append(item)
        self._closing = waiting

    def _hand_over_all(self) -> None:
        closing, self._closing = self._closing, []
        for span, end, group, _ in closing:
            self._hand_over(span, end, group)

    def _hand_over(self, span: trace.Span, end: int, group: str) -> None:
        assert self._scope is not None
        span.set_attribute("opennua.action_seqs", list(self._scope.seqs(group)))
        span.end(end_time=end)

    def _attributes(self, run: RunState) -> dict[str, AttributeValue]:
        assert self._scope is not None
        return {
            **self._scope.attributes,
            "opennua.run_id": run.run_id,
            "opennua.parent_run_id": run.parent_run_id or "",
        }

    @asynccontextmanager
    async def run(
        self, run: RunState, settle: Callable[[], Awaitable[None]]
    ) -> AsyncIterator[None]:
        """An `invoke_agent` span around driving `run` (current while it is driven)."""
        scope = self._scope
        if scope is None:
            yield
            return
        name = self._agent_name if run.parent_run_id is None else run.name
        parent = context_of(scope.traceparent) if run.parent_run_id is None else None
        span = scope.tracing.tracer.start_span(
            f"invoke_agent {name}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": self._provider,
                "gen_ai.request.model": self._model_name,
                "gen_ai.agent.name": name,
                "gen_ai.agent.id": run.run_id,
                "gen_ai.conversation.id": str(scope.attributes.get("opennua.session_id", "")),
                **self._attributes(run),
            },
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            yield
            await settle()  # the run's last actions have seqs once they are durable
        except Suspend:
            span.set_attribute("opennua.suspended", True)  # waits for a person: no error
            if run.parent_run_id is None:
                await settle()  # the seqs of what led here
            raise
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            otel_context.detach(token)
            if run.parent_run_id is None:
                self._hand_over_all()  # the attempt ends: nothing waits any longer
            span.set_attribute("opennua.action_seqs", list(scope.seqs(run.run_id)))
            span.end()

    @contextmanager
    def tool(self, run: RunState, call: PendingCall) -> Any:
        """An `execute_tool` span around handling `run`'s current call."""
        scope = self._scope
        if scope is None:
            yield
            return
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.call_id,
            "gen_ai.tool.type": "function",
            **self._attributes(run),
        }
        if scope.tracing.include_content:
            args = call.args if isinstance(call.args, str) else json.dumps(call.args)
            attributes["gen_ai.tool.call.arguments"] = args
        span = scope.tracing.tracer.start_span(
            f"execute_tool {call.name}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            yield
        except Suspend:
            span.set_attribute("opennua.suspended", True)
            raise
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            raise
        finally:
            otel_context.detach(token)
            # Its result is in a step queued by now.
            self._close(span, f"{run.run_id}/{call.call_id}", self._steps.queued_steps)

    @contextmanager
    def chat(
        self, run: RunState, message_id: str, key: str, instructions: str
    ) -> Iterator[Callable[[ModelResponse], None]]:
        """A `chat` span and the GenAI histograms around one model request of `run` (`key`:
        its events' key prefix); call what it yields with the response."""
        tracing = self._tracing
        if tracing is None:
            yield _ignore
            return
        base: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self._provider,
            "gen_ai.request.model": self._model_name,
        }
        span: trace.Span = trace.INVALID_SPAN
        if self._scope is not None:
            span = tracing.tracer.start_span(
                f"chat {self._model_name}",
                kind=SpanKind.CLIENT,
                attributes={**base, **self._attributes(run), "opennua.message_id": message_id},
            )
            if tracing.include_content:
                span.set_attributes(_input_content(run, instructions))
        start = time.perf_counter()
        answered = False

        def record(response: ModelResponse) -> None:
            nonlocal answered
            answered = True
            base["gen_ai.response.model"] = response.model_name or self._model_name
            usage = usage_of(response)
            tokens = tracing.token_usage
            tokens.record(usage["input_tokens"], {**base, "gen_ai.token.type": "input"})
            tokens.record(usage["output_tokens"], {**base, "gen_ai.token.type": "output"})
            if not span.is_recording():
                return
            span.set_attributes({USAGE_ATTRIBUTES[k]: v for k, v in usage.items()})
            span.set_attribute("gen_ai.response.model", base["gen_ai.response.model"])
            if response.provider_response_id:
                span.set_attribute("gen_ai.response.id", response.provider_response_id)
            if response.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
            if tracing.include_content:
                output = _CONVERTER.messages_to_otel_messages([response])
                span.set_attribute("gen_ai.output.messages", json.dumps(output))

        try:
            yield record
        except BaseException as exc:
            base["error.type"] = type(exc).__qualname__
            span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            span.set_attribute("error.type", type(exc).__qualname__)
            raise
        finally:
            tracing.operation_duration.record(time.perf_counter() - start, base)
            if span.is_recording():
                # A response's actions ride in the loop's next step.
                steps = self._steps.queued_steps + (1 if answered else 0)
                self._close(span, key, steps)


#: pydantic-ai's conversion of messages to the GenAI conventions' JSON (content only).
_CONVERTER = InstrumentationSettings(include_content=True, include_binary_content=False)


def _ignore(response: ModelResponse) -> None:
    pass


def _input_content(run: RunState, instructions: str) -> dict[str, AttributeValue]:
    messages = _CONVERTER.messages_to_otel_messages(list(run.messages))
    system = [{"type": "text", "content": instructions}]
    return {
        "gen_ai.system_instructions": json.dumps(system),
        "gen_ai.input.messages": json.dumps(messages),
    }
