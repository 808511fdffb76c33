"""Deliveries are spans of their turn's trace: real Synapse, a real `nua serve` and the
bridge as its own process, both exporting (standard `OTEL_*` variables) to a real
OTLP/HTTP receiver. Every try of a delivery that renders the turn is a `send` span whose
parent is the turn span the Host fixed at acceptance."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.polling import until
from tests.server._serve_proc import Served, nua_serve
from tests.tracing._otlp import Receiver, Span

from ._matrix_env import (
    BridgeProc,
    Person,
    Synapse,
    deliveries_settled,
    request_message,
    session_of,
    session_state,
    turn_ended,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """The receiver, its endpoint in the environment of every process the test starts."""
    with Receiver() as running:
        for name, value in running.env().items():
            monkeypatch.setenv(name, value)
        yield running


@pytest.fixture
def served(receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0.4")
    with nua_serve(tmp_path / "data", "--sandbox", "none") as s:
        yield s


async def test_each_delivery_of_a_turn_is_a_send_span_under_the_turn_span(
    synapse: Synapse, served: Served, bridge: BridgeProc, alice: Person, receiver: Receiver
) -> None:
    bot = synapse.bot["user_id"]
    room = await alice.dm(bot)
    await alice.say(room, "Write a short report")
    request = await request_message(alice, room, bot)
    await alice.react(room, request["event_id"], "✅")
    sid = session_of(served, room)
    await turn_ended(served, sid)
    state = await deliveries_settled(served, sid)
    turn = state["turns"][-1]
    deliveries = state["deliveries"]

    async def arrived() -> list[Span] | None:
        spans = receiver.snapshot()
        sent = {s.attributes["opennua.delivery_id"] for s in spans if s.name == "send"}
        turn_span = any(s.name == "turn" for s in spans)
        return spans if turn_span and set(deliveries) <= sent else None

    spans = await until(
        arrived, 60, interval=0.3, what=f"not every delivery became a span: {bridge.log()[-2000:]}"
    )

    (root,) = [s for s in spans if s.name == "turn"]
    assert root.trace_id == turn["trace_id"]
    turn_span = hashlib.sha256(f"{turn['execution_id']}/turn".encode()).hexdigest()[:16]
    assert root.span_id == turn_span
    sends = [s for s in spans if s.name == "send"]
    for span in sends:
        assert span.trace_id == turn["trace_id"], span.attributes
        assert span.parent_span_id == root.span_id, span.attributes
        assert span.attributes["messaging.system"] == "matrix"
        assert span.attributes["messaging.operation.type"] == "send"
        assert span.attributes["messaging.destination.name"] == room
        assert span.attributes["opennua.session_id"] == sid
        assert span.attributes["opennua.turn_id"] == turn["turn_id"]
        assert span.attributes["opennua.execution_id"] == turn["execution_id"]
        assert span.start_ns <= span.end_ns
    # Each delivery the Host knows was sent: a span with its Matrix event id.
    by_delivery: dict[str, list[Span]] = {}
    for span in sends:
        by_delivery.setdefault(span.attributes["opennua.delivery_id"], []).append(span)
    for did, delivery in deliveries.items():
        sent = [s for s in by_delivery[did] if s.attributes["opennua.delivery.status"] == "sent"]
        assert len(sent) == 1, (did, [s.attributes for s in by_delivery[did]])
        assert sent[0].attributes["messaging.message.id"] == delivery["event_id"]
        assert sent[0].attributes["opennua.delivery.kind"] == delivery["kind"]
    kinds = {s.attributes["opennua.delivery.kind"] for s in sends}
    assert {"card", "edit", "request", "reaction", "upload"} <= kinds, kinds
    # The turn's own spans are there too: one trace from the room to the tools.
    assert any(s.name.startswith("invoke_agent") for s in spans)
    assert session_state(served, sid)["turns"][-1]["trace_id"] == root.trace_id
