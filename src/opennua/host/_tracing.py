"""The trace a turn belongs to, decided once when the Host accepts it (W3C Trace Context).

The request that sent the message may carry a `traceparent`: the turn then joins that
trace, its span a child of the request's. Otherwise the trace id is derived from the
execution id. The turn's span id is derived from the execution id too, so every attempt,
in any process, parents its spans to the same turn span. Pure: no OpenTelemetry here; the
server sets `trace_parent` for the request, the supervisor turns the record into spans.
"""

from __future__ import annotations

import contextvars
import hashlib
import re
from typing import Any

#: The validated `traceparent` of the request being handled (the server sets it per request).
trace_parent: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "opennua_trace_parent", default=None
)

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


def parse_traceparent(value: str | None) -> tuple[str, str, str] | None:
    """`(trace_id, span_id, flags)` of a valid version-00 `traceparent`, else None (an
    invalid header is ignored, as W3C Trace Context says, never an error)."""
    if not value:
        return None
    match = _TRACEPARENT.fullmatch(value.strip())
    if match is None:
        return None
    version, trace_id, span_id, flags = match.groups()
    if version == "ff" or trace_id == "0" * 32 or span_id == "0" * 16:
        return None
    return trace_id, span_id, flags


def turn_trace(
    execution_id: str, traceparent: str | None, *, retry_of: Any = None
) -> dict[str, Any]:
    """The trace context stored with a new execution: the turn span's `traceparent`, the
    request span it is a child of (None when the request carried no valid one) and, for a
    retry, the turn span of the turn it retries (its span links to that one)."""
    parent = parse_traceparent(traceparent)
    digest = hashlib.sha256(execution_id.encode()).hexdigest()
    trace_id, flags = (parent[0], parent[2]) if parent else (digest[:32], "01")
    span_id = hashlib.sha256(f"{execution_id}/turn".encode()).hexdigest()[:16]
    retried = retry_of.get("traceparent") if isinstance(retry_of, dict) else None
    return {
        "traceparent": f"00-{trace_id}-{span_id}-{flags}",
        "parent": f"00-{parent[0]}-{parent[1]}-{parent[2]}" if parent else None,
        "links": [retried] if isinstance(retried, str) else [],
    }
