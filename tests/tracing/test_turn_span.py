"""The turn span takes the ids the Host stored with the execution, whichever process emits
it: a child of the request's span, linked to the turn a retry retries."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from opennua.host._tracing import turn_trace
from opennua.runtime import Tracing
from opennua.server._tracing import _PinnableIds
from opennua.store import Execution
from opennua.supervisor._tracing import emit_turn_span

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _emit(trace_context: dict[str, object]) -> tuple[ReadableSpan, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=_PinnableIds())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    execution = Execution(
        execution_id="exe_b",
        session_id="ses_a",
        turn_id="trn_b",
        status="completed",
        created_at=1_800_000_000.0,
        trigger={"kind": "message", "client_id": "cli_x"},
        trace_context=trace_context,
    )
    emit_turn_span(
        Tracing(tracer_provider=provider),
        execution,
        attempts=2,
        stop_reason="end_turn",
        error=None,
        ended_at=1_800_000_030.0,
        seqs=[41],
    )
    (span,) = exporter.get_finished_spans()
    return span, exporter


def test_the_turn_span_has_the_stored_ids_the_callers_parent_and_the_retried_link() -> None:
    retried = turn_trace("exe_a", None)
    stored = turn_trace("exe_b", CALLER, retry_of=retried)
    span, _ = _emit(stored)
    ctx = span.get_span_context()
    assert f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-01" == stored["traceparent"]
    assert f"{span.parent.span_id:016x}" == "00f067aa0ba902b7"
    (link,) = span.links
    assert (
        f"00-{link.context.trace_id:032x}-{link.context.span_id:016x}-01" == retried["traceparent"]
    )
    attributes = span.attributes
    assert attributes["opennua.client_id"] == "cli_x"
    assert attributes["opennua.action_seqs"] == (41,)
    assert span.end_time - span.start_time == 30 * 10**9


def test_without_a_caller_the_turn_span_is_the_root_of_the_turns_own_trace() -> None:
    stored = turn_trace("exe_b", None)
    span, _ = _emit(stored)
    ctx = span.get_span_context()
    assert f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-01" == stored["traceparent"]
    assert span.parent is None
    assert span.links == ()
