"""The gateway's span of each call it answered, in the turn's trace (docs/observability.md).

One `SERVER` span per request, named as the OpenTelemetry MCP conventions name a server's
span: `{mcp.method.name} {target}` (`tools/call lookup`, `initialize`), or the HTTP
server's `{method} {route}` for a request that is no JSON-RPC call (the transport's
`DELETE`). Its parent is the caller's `traceparent` header (the runtime sends the one of
the `execute_tool` span that made the call), else the `_meta.traceparent` of the JSON-RPC
params (SEP-414), else the turn's span: a call the runtime makes outside any tool call
(connecting, listing tools) still joins the turn. A parent is taken only from a request
whose ticket named an execution, and only in that execution's trace; a request with no
valid ticket is a root span of its own; one answered before any check (the `GET` of the
standalone stream, 405) is no span.

The span is made when the answer is known (with the request's start time), so its
parent can be chosen from what the ticket proved. It holds names only — the server, the
tool, the credentials' secret names, codes — never a header, a body or a secret value.
Without a tracer provider nothing here runs.
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from opennua._common import traceparent_in, turn_attributes
from opennua.host import parse_traceparent
from opennua.store import Execution

_PROPAGATOR = TraceContextTextMapPropagator()
#: The route of a gateway call to an MCP server (the server is a path parameter), and
#: to an A2A agent (`call["route"]`).
ROUTE = "/v1/gateway/mcp/{server}"
A2A_ROUTE = "/v1/gateway/a2a/{agent}"
#: What the gateway learnt of a call (the audit's names) -> its attribute. `credential`
#: is the secrets' *names*, never a value.
_FACTS = {
    "host": "opennua.gateway.host",
    "credential": "opennua.gateway.credentials",
    "principal_id": "opennua.principal_id",
    "workspace_id": "opennua.workspace_id",
}


class CallSpans:
    def __init__(self, tracer_provider: trace.TracerProvider | None) -> None:
        self._tracer = (
            tracer_provider.get_tracer("opennua.gateway") if tracer_provider is not None else None
        )

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    def emit(
        self,
        call: dict[str, Any],
        message: dict[str, Any],
        *,
        method: str,
        header: str | None,
        status: int,
        start_ns: int,
    ) -> None:
        """The span of one answered request: `call` is what the gateway learnt of it (the
        audit's facts, and the `execution` once the ticket proved one)."""
        execution: Execution | None = call.get("execution")
        if self._tracer is None or (execution is None and "outcome" not in call):
            # Answered before any check (the standalone stream's 405): nothing to say.
            return
        rpc = message.get("method")
        route = str(call.get("route", ROUTE))
        name = f"{method} {route}"
        attributes: dict[str, AttributeValue] = {
            "http.request.method": method,
            "http.route": route,
            "http.response.status_code": status,
            "opennua.gateway.server": str(call.get("server", "")),
        }
        if isinstance(rpc, str):
            attributes["mcp.method.name" if route == ROUTE else "rpc.method"] = rpc[:200]
            if "id" in message:
                attributes["jsonrpc.request.id"] = str(message["id"])[:200]
            tool = call.get("tool")
            name = f"{rpc[:200]} {tool}" if tool else rpc[:200]
            if tool:
                attributes["gen_ai.operation.name"] = "execute_tool"
                attributes["gen_ai.tool.name"] = tool
        for key, attribute in _FACTS.items():
            if call.get(key):
                attributes[attribute] = str(call[key])
        outcome = call.get("outcome") or ("ok" if status < 400 else "error")
        attributes["opennua.gateway.outcome"] = outcome
        if call.get("code"):
            attributes["opennua.gateway.code"] = str(call["code"])
        parent: Context | None = None
        if execution is not None:
            attributes.update(turn_attributes(execution))
            attributes["opennua.attempt"] = execution.attempt
            parent = _parent(execution, header, message)
        span = self._tracer.start_span(
            name,
            context=parent if parent is not None else Context(),
            kind=SpanKind.SERVER,
            start_time=start_ns,
            attributes=attributes,
        )
        if outcome != "ok":
            code = str(call.get("code") or f"http_{status}")
            span.set_attribute("error.type", code)
            span.set_status(Status(StatusCode.ERROR, code))
        span.end(end_time=time.time_ns())


def _parent(execution: Execution, header: str | None, message: dict[str, Any]) -> Context | None:
    turn = traceparent_in(execution.trace_context)
    turn_trace = parse_traceparent(turn)
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    carried = meta.get("traceparent") if isinstance(meta, dict) else None
    for candidate in (header, carried if isinstance(carried, str) else None):
        parsed = parse_traceparent(candidate)
        # The caller's span, when it is in the turn's trace (a ticket proves the
        # execution, not which trace its caller may write into).
        if parsed is not None and (turn_trace is None or parsed[0] == turn_trace[0]):
            return _PROPAGATOR.extract({"traceparent": "00-{}-{}-{}".format(*parsed)})
    return _PROPAGATOR.extract({"traceparent": turn}) if turn_trace is not None else None
