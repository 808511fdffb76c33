"""Deliveries as spans of their turn's trace (docs/observability.md, docs/bridge.md).

Each try at sending a delivery that renders a turn (its card and the card's edits, an
input request, its reactions and its resolution, an uploaded artifact) is a `send` span,
a child of the turn's span: the Host fixed that span when it accepted the turn and names
it in the execution's `traceparent` (`GET /v1/executions/{eid}`), read once per turn.
The span follows the OpenTelemetry messaging conventions (`messaging.system` `matrix`,
the room as the destination, the Matrix event id as the message id); a reply to a
person's message belongs to no turn and is not traced.

Configured from the standard `OTEL_*` variables by the rules `nua serve` follows
(`opennua._common`). Off unless an OTLP endpoint or
`OTEL_TRACES_EXPORTER` is set; off, nothing here runs and no execution is read.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from opennua._common import otlp_span_exporter, service_resource, traces_enabled

from ._deliveries import CHANNEL, DeliveryState

_log = logging.getLogger(__name__)
_PROPAGATOR = TraceContextTextMapPropagator()


def tracer_provider_from_env(env: Mapping[str, str]) -> TracerProvider | None:
    """A provider exporting over OTLP as the `OTEL_*` variables say, or None (off)."""
    if not traces_enabled(env):
        return None
    provider = TracerProvider(resource=service_resource(env, "opennua-bridge"))
    provider.add_span_processor(BatchSpanProcessor(otlp_span_exporter(env)))
    return provider


class DeliverySpans:
    """The `send` spans of one bridge; `read_execution` is the Host's execution record."""

    def __init__(
        self,
        provider: trace.TracerProvider,
        read_execution: Callable[[str], Awaitable[Mapping[str, Any]]],
    ) -> None:
        self._tracer = provider.get_tracer("opennua.bridge")
        self._read = read_execution
        #: execution id -> its turn span's traceparent (None: it has none)
        self._turns: dict[str, str | None] = {}

    async def _traceparent(self, execution_id: str) -> str | None:
        if execution_id not in self._turns:
            try:
                doc = await self._read(execution_id)
            except Exception as exc:  # the Host unreachable: try with the next delivery
                _log.debug("no trace context for %s: %s", execution_id, exc)
                return None
            value = doc.get("traceparent")
            self._turns[execution_id] = value if isinstance(value, str) else None
        return self._turns[execution_id]

    async def emit(
        self,
        turn: Mapping[str, str],
        tried: DeliveryState,
        event_type: str,
        start_ns: int,
        end_ns: int,
    ) -> None:
        """The span of one try of a delivery of `turn` (its ids: `turn_id`,
        `execution_id`, `client_id`), ended in state `tried`."""
        traceparent = await self._traceparent(turn["execution_id"])
        if traceparent is None:
            return  # not in the turn's trace: a span of its own would mislead
        attributes: dict[str, AttributeValue] = {
            "messaging.system": CHANNEL,
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
            "messaging.destination.name": tried.room_id,
            "opennua.session_id": tried.session_id,
            "opennua.turn_id": turn["turn_id"],
            "opennua.execution_id": turn["execution_id"],
            "opennua.client_id": turn.get("client_id") or "",
            "opennua.delivery_id": tried.delivery_id,
            "opennua.delivery.kind": tried.kind,
            "opennua.delivery.event_type": event_type,
            "opennua.delivery.status": tried.status,
            "opennua.delivery.attempt": tried.attempts,
        }
        if tried.event_id is not None:
            attributes["messaging.message.id"] = tried.event_id
        span = self._tracer.start_span(
            "send",
            context=_PROPAGATOR.extract({"traceparent": traceparent}),
            kind=SpanKind.PRODUCER,
            start_time=start_ns,
            attributes=attributes,
        )
        if tried.status != "sent":
            code = tried.error_code or "error"
            span.set_attribute("error.type", code)
            span.set_status(Status(StatusCode.ERROR, code))
        span.end(end_time=end_ns)
