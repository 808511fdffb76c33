"""The supervisor's part of a turn's trace: each attempt's `TraceScope`, and the turn span.

The turn span's ids were fixed by the Host at acceptance and stored with the execution
(`trace_context`), so attempts in any process parent their spans to it while it does not
exist yet; the attempt that ends the turn emits it, from acceptance to the end, with those
ids. An attempt killed with the turn unfinished leaves its children parented to a span
that the attempt ending the turn will emit.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from opennua._common import traceparent_in, turn_attributes
from opennua.runtime import TraceScope, Tracing, context_of, link_to, pinned_ids
from opennua.store import Claimed, Execution


def attempt_scope(tracing: Tracing, claimed: Claimed, supervisor_id: str, seqs: Any) -> TraceScope:
    """The attempt's scope: its spans continue the turn's trace, marked with the attempt."""
    execution = claimed.execution
    return TraceScope(
        tracing=tracing,
        traceparent=traceparent_in(execution.trace_context),
        attributes={
            **turn_attributes(execution),
            "opennua.attempt": claimed.attempt,
            "opennua.attempt_id": claimed.attempt_id,
            "opennua.supervisor_id": supervisor_id,
        },
        seqs=seqs,
    )


def emit_turn_span(
    tracing: Tracing,
    execution: Execution,
    *,
    attempts: int,
    stop_reason: str,
    error: dict[str, Any] | None,
    ended_at: float,
    seqs: list[int],
) -> None:
    """The turn's span, with the ids the Host chose (nothing when it stored none)."""
    traceparent = traceparent_in(execution.trace_context)
    own = trace.get_current_span(context_of(traceparent)).get_span_context()
    if not own.is_valid:
        return
    context = execution.trace_context if isinstance(execution.trace_context, dict) else {}
    parent = context.get("parent")
    # A retry's turn links to the turn it retries (another trace).
    links = [link for value in context.get("links") or () for link in link_to(value)]
    token = pinned_ids.set((own.trace_id, own.span_id))
    try:
        span = tracing.tracer.start_span(
            "turn",
            context=context_of(parent if isinstance(parent, str) else None),
            kind=SpanKind.SERVER if parent else SpanKind.INTERNAL,
            start_time=int(execution.created_at * 1e9),
            links=links,
            attributes={
                **turn_attributes(execution),
                "opennua.attempts": attempts,
                "opennua.stop_reason": stop_reason,
                "opennua.action_seqs": seqs,
            },
        )
    finally:
        pinned_ids.reset(token)
    if error:
        span.set_status(Status(StatusCode.ERROR, str(error.get("code", "error"))))
    span.end(end_time=int(ended_at * 1e9))
