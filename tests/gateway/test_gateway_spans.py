"""Gateway calls are spans of the turn's trace: a real `nua serve` exporting to a real
OTLP/HTTP receiver, a remote MCP server reached through the gateway. Each proxied
`tools/call` is a child of the `execute_tool` span that made it (the runtime sends its
`traceparent`); the calls made outside a tool call (connecting, listing) are children of
the turn span; a request without a ticket is no part of anyone's trace. The credential
canary is in no exported byte."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.polling import wait_for
from tests.cli.conftest import Nua
from tests.e2e._proc import FakeProvider
from tests.tracing._otlp import Receiver, Span

from ._flows import DEPLOY, INIT, MCP_HEADERS, SCRIPTS, ask, calls_by_name, ended, setup
from .conftest import Remote

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

FOREIGN_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider(SCRIPTS).start()
    try:
        yield fake
    finally:
        fake.stop()


def _gateway_spans(spans: list[Span]) -> list[Span]:
    return [s for s in spans if s.attributes.get("http.route") == "/v1/gateway/mcp/{server}"]


def test_each_gateway_call_is_a_span_under_its_tool_call_and_holds_no_secret(
    tmp_path: Path, remote: Remote, provider: FakeProvider
) -> None:
    canary = remote.token
    with Receiver() as receiver:
        server = setup(tmp_path, remote, provider, env=receiver.env())
        nua = Nua(server)
        try:
            assert nua("secret", "set", "notes-token", input=canary + "\n").exit_code == 0
            assert nua(*DEPLOY).exit_code == 0
            with server.client() as http:
                sid, execution_id = ask(http, "use the notes")
                turn = ended(http, sid)
                assert turn["stop_reason"] == "end_turn", turn
                assert calls_by_name(turn)["notes__whoami"]["output"].endswith(
                    "[redacted:notes-token]"
                )
                # No ticket, and a traceparent of someone else's trace: refused, and the
                # span does not join that trace.
                refused = http.post(
                    "/v1/gateway/mcp/notes",
                    json=INIT,
                    headers={**MCP_HEADERS, "traceparent": f"00-{FOREIGN_TRACE}-{'1' * 16}-01"},
                )
                assert refused.status_code == 401
                # Answered before any check (no standalone stream): no span at all.
                assert http.get("/v1/gateway/mcp/notes").status_code == 405

            def arrived() -> list[Span] | None:
                spans = receiver.snapshot()
                names = {s.name for s in spans}
                wanted = {"turn", "tools/call lookup", "tools/call broken"}
                unticketed = [
                    s for s in _gateway_spans(spans) if "opennua.session_id" not in s.attributes
                ]
                return spans if wanted <= names and unticketed else None

            spans = wait_for(arrived, timeout=30)
        finally:
            server.stop()

    (root,) = [s for s in spans if s.name == "turn"]
    assert root.trace_id == turn["trace_id"]
    assert root.span_id == hashlib.sha256(f"{execution_id}/turn".encode()).hexdigest()[:16]
    gateway = _gateway_spans(spans)
    ours = [s for s in gateway if s.attributes.get("opennua.execution_id") == execution_id]
    assert {s.trace_id for s in ours} == {turn["trace_id"]}
    by_id = {s.span_id: s for s in spans}

    # Every tools/call is the child of the execute_tool span that made it.
    calls = {s.attributes["gen_ai.tool.name"]: s for s in ours if s.name.startswith("tools/call")}
    assert set(calls) == {"whoami", "quirky", "broken", "lookup"}
    for tool, span in calls.items():
        parent = by_id[span.parent_span_id]
        assert parent.name == f"execute_tool notes__{tool}", (tool, parent.name)
        assert parent.trace_id == span.trace_id
        assert span.attributes["mcp.method.name"] == "tools/call"
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.attributes["opennua.gateway.server"] == "notes"
        assert span.attributes["opennua.gateway.host"] == "127.0.0.1"
        assert span.attributes["opennua.gateway.credentials"] == "notes-token"
        assert span.attributes["opennua.session_id"] == sid
        assert span.attributes["opennua.turn_id"] == turn["turn_id"]
        assert span.attributes["http.response.status_code"] == 200
        assert span.start_ns <= span.end_ns
    assert calls["whoami"].attributes["opennua.gateway.outcome"] == "ok"
    assert calls["lookup"].attributes["opennua.gateway.outcome"] == "ok"
    assert calls["broken"].attributes["opennua.gateway.outcome"] == "error"
    assert calls["broken"].attributes["error.type"] == "tool_error"

    # Connecting and listing happen outside any tool call: children of the turn span.
    (initialize,) = [s for s in ours if s.name == "initialize"]
    assert initialize.parent_span_id == root.span_id
    listing = [s for s in ours if s.name == "tools/list"]
    assert listing and all(s.parent_span_id == root.span_id for s in listing)

    # The request without a ticket: refused, a root of its own, not in the foreign trace;
    # it is the only span of no execution (the GET answered 405 is none).
    (alone,) = [s for s in gateway if "opennua.session_id" not in s.attributes]
    assert alone.attributes["opennua.gateway.outcome"] == "refused"
    assert alone.attributes["opennua.gateway.code"] == "unauthorized"
    assert alone.parent_span_id == "" and alone.trace_id != FOREIGN_TRACE

    # The credential is in no byte the backend received (attributes, events, resource).
    assert receiver.raw and all(canary.encode() not in body for body in receiver.raw)
    control = b"".join(receiver.raw) + canary.encode()  # the search finds a value that is there
    assert canary.encode() in control
