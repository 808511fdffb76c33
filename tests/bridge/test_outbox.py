"""The outbox's state machine with a fake clock and a scripted homeserver: transient
failures retry with backoff, final ones fail, edits wait for their target, and every
change owes the Host one report, in order."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from opennua.bridge import RetryPolicy
from opennua.bridge._bridge import BridgeConfig, MatrixBridge
from opennua.bridge._deliveries import DeliveryState
from opennua.bridge._ledger import Ledger, Outgoing
from opennua.bridge._matrix import MatrixError
from opennua.bridge._outbox import Outbox
from opennua.bridge._tracing import DeliverySpans


class Homeserver:
    """Answers each `send` with the next scripted outcome: an event id or an error."""

    def __init__(self, *outcomes: str | MatrixError) -> None:
        self.outcomes = list(outcomes)
        self.sent: list[tuple[str, str, dict[str, Any]]] = []

    async def send(self, room_id: str, event_type: str, txn_id: str, content: Any) -> str:
        self.sent.append((txn_id, event_type, content))
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, MatrixError):
            raise outcome
        return outcome


def _outbox(tmp_path: Path, hs: Homeserver, now: list[float]) -> Outbox:
    return Outbox(
        Ledger(tmp_path / "bridge.db"), hs, None,  # type: ignore[arg-type]
        retry=RetryPolicy(base=1.0, cap=8.0, max_attempts=3),
        client_id="cli_bridge", clock=lambda: now[0], rand=lambda: 0.5,
    )  # fmt: skip


def _out(did: str, kind: str = "card", parent: str | None = None) -> Outgoing:
    state = DeliveryState(did, "ses_a", "!r:hs", kind, "pending")
    content = {"body": "b", "html": "b"} if parent else {"msgtype": "m.notice", "body": "b"}
    return Outgoing(state, "m.room.message", content, parent, "trn_1")


async def test_transient_failures_retry_with_backoff_then_the_delivery_is_sent(
    tmp_path: Path,
) -> None:
    down = MatrixError("unreachable", "refused", transient=True)
    hs, now = Homeserver(down, down, "$card"), [1000.0]
    outbox = _outbox(tmp_path, hs, now)
    assert outbox.enqueue(_out("dlv_card")) and not outbox.enqueue(_out("dlv_card"))
    for _ in range(3):
        (head,) = outbox.ledger.open_deliveries()
        await outbox._attempt(head)
        if head.state.attempts == 0:
            retrying = outbox.ledger.get("dlv_card")
            assert retrying is not None and retrying.state.status == "retrying"
            assert retrying.state.next_at == 1000.0 + 0.75  # step 1 s: half + half × 0.5
        now[0] += 10
    sent = outbox.ledger.get("dlv_card")
    assert sent is not None and (sent.state.status, sent.state.event_id) == ("sent", "$card")
    assert [txn for txn, _, _ in hs.sent] == ["dlv_card"] * 3  # one transaction id throughout
    reports = [body for _, _, body in outbox.ledger.reports()]
    assert [(r["status"], r["attempts"]) for r in reports] == [
        ("pending", 0), ("retrying", 1), ("retrying", 2), ("sent", 3),
    ]  # fmt: skip
    assert reports[1]["error"] == {"code": "unreachable", "message": "refused"}
    assert reports[1]["next_attempt_at"] == "1970-01-01T00:16:40.750Z"
    assert len({r["intent_id"] for r in reports}) == 4


async def test_a_final_error_fails_at_once_and_its_edits_fail_with_it(tmp_path: Path) -> None:
    hs = Homeserver(MatrixError("M_FORBIDDEN", "not in room", transient=False))
    outbox = _outbox(tmp_path, hs, [0.0])
    outbox.enqueue(_out("dlv_card"))
    outbox.enqueue(_out("dlv_edit", "edit", parent="dlv_card"))
    card, edit = outbox.ledger.open_deliveries()
    await outbox._attempt(card)
    failed = outbox.ledger.get("dlv_card")
    assert failed is not None and failed.state.status == "failed"
    assert failed.state.error_code == "M_FORBIDDEN"
    await outbox._attempt(edit)
    orphan = outbox.ledger.get("dlv_edit")
    assert orphan is not None and orphan.state.status == "failed"
    assert orphan.state.error_code == "parent_failed" and len(hs.sent) == 1


async def test_too_many_transient_failures_give_up(tmp_path: Path) -> None:
    busy = MatrixError("M_LIMIT_EXCEEDED", "slow down", transient=True)
    outbox = _outbox(tmp_path, Homeserver(busy, busy, busy), [0.0])
    outbox.enqueue(_out("dlv_card"))
    for _ in range(3):
        (head,) = outbox.ledger.open_deliveries()
        await outbox._attempt(head)
    gave_up = outbox.ledger.get("dlv_card")
    assert gave_up is not None and (gave_up.state.status, gave_up.state.attempts) == ("failed", 3)
    assert outbox.ledger.open_deliveries() == []


async def test_an_edit_is_sent_as_m_replace_of_its_sent_target(tmp_path: Path) -> None:
    hs = Homeserver("$card", "$edit")
    outbox = _outbox(tmp_path, hs, [0.0])
    outbox.enqueue(_out("dlv_card"))
    outbox.enqueue(_out("dlv_edit", "edit", parent="dlv_card"))
    for out in outbox.ledger.open_deliveries():
        await outbox._attempt(outbox.ledger.get(out.state.delivery_id) or out)
    _, _, edit = hs.sent[1]
    assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$card"}


async def test_with_tracing_each_try_of_a_turns_delivery_is_a_span_under_the_turn(
    tmp_path: Path,
) -> None:
    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    turn_span = f"00-{'a' * 32}-{'b' * 16}-01"
    reads: list[str] = []

    async def execution(execution_id: str) -> dict[str, Any]:
        reads.append(execution_id)
        return {"execution_id": execution_id, "traceparent": turn_span}

    down = MatrixError("unreachable", "refused", transient=True)
    hs, now = Homeserver(down, "$card", "$reply"), [1000.0]
    outbox = _outbox(tmp_path, hs, now)
    outbox.spans = DeliverySpans(provider, execution)
    outbox.ledger.set_turn("dlv_card", "trn_1", "exe_1", "cli_web")
    outbox.enqueue(_out("dlv_card"))
    outbox.enqueue(_out("dlv_reply", "reply"))  # a reply renders no turn: no span
    # A restart: another ledger on the same file still knows the card's turn.
    outbox.ledger = Ledger(tmp_path / "bridge.db")
    for _ in range(2):
        (head, _reply) = outbox.ledger.open_deliveries()
        await outbox._attempt(head)
        now[0] += 10
    (reply,) = outbox.ledger.open_deliveries()
    await outbox._attempt(reply)

    spans = exported.get_finished_spans()
    assert [s.attributes["opennua.delivery.status"] for s in spans] == ["retrying", "sent"]
    assert reads == ["exe_1"]  # the turn's traceparent is read once
    for span in spans:
        assert span.name == "send" and span.kind is SpanKind.PRODUCER
        assert span.parent is not None and span.parent.span_id == int("b" * 16, 16)
        assert span.context.trace_id == int("a" * 32, 16)
        assert span.attributes["opennua.turn_id"] == "trn_1"
        assert span.attributes["opennua.client_id"] == "cli_web"
        assert span.attributes["messaging.destination.name"] == "!r:hs"
    failed, sent = spans
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["error.type"] == "unreachable"
    assert sent.status.status_code is StatusCode.UNSET
    assert sent.attributes["messaging.message.id"] == "$card"
    assert sent.attributes["opennua.delivery.attempt"] == 2


class GatedHomeserver(Homeserver):
    """A send whose answer (the event id) comes only once `gate` is set: the homeserver
    has the event, the bridge has not read its id yet."""

    def __init__(self, *outcomes: str | MatrixError) -> None:
        super().__init__(*outcomes)
        self.gate = asyncio.Event()

    async def send(self, room_id: str, event_type: str, txn_id: str, content: Any) -> str:
        event_id = await super().send(room_id, event_type, txn_id, content)
        await self.gate.wait()
        return event_id


async def test_a_reaction_to_a_message_whose_send_is_not_recorded_yet_is_answered(
    tmp_path: Path,
) -> None:
    """A person reacts to the bridge's request message before the bridge has read the
    send's answer (under load the sync bringing the reaction can be handled first): the
    reaction waits for that record instead of being dropped as "not to a request"."""
    config = BridgeConfig(
        homeserver="http://127.0.0.1:9", user_id="@bot:hs", token="t",
        host_url="http://127.0.0.1:9", host_token=None, state_path=tmp_path / "bridge.db",
    )  # fmt: skip
    bridge = MatrixBridge(config)
    hs = GatedHomeserver("$request")
    bridge.outbox.matrix = hs  # type: ignore[assignment]
    answered: list[tuple[str, str, str | None]] = []

    async def answer(room: str, event: Any, sender: str, sid: str, rid: str, **kw: Any) -> None:
        answered.append((sid, rid, kw.get("reaction")))

    bridge._answer = answer  # type: ignore[method-assign]
    state = DeliveryState("dlv_request", "ses_a", "!r:hs", "request", "pending")
    request = Outgoing(state, "m.room.message", {"msgtype": "m.notice", "body": "✋"}, None,
                       "req_1")  # fmt: skip
    assert bridge.outbox.enqueue(request)
    try:
        sending = asyncio.create_task(bridge.outbox._attempt(request))
        await asyncio.sleep(0)  # the send is out; its answer is not read
        assert hs.sent and bridge.ledger.source_of_event("$request") is None
        reaction = {
            "type": "m.reaction", "sender": "@alice:hs", "event_id": "$reaction",
            "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$request",
                                         "key": "✅"}},
        }  # fmt: skip
        reacting = asyncio.create_task(bridge._on_event("!r:hs", reaction))
        await asyncio.sleep(0.05)
        assert not reacting.done(), "the reaction waits for the send's record"
        hs.gate.set()
        await asyncio.wait_for(asyncio.gather(sending, reacting), 5)
        assert answered == [("ses_a", "req_1", "✅")]
    finally:
        await bridge.matrix.aclose()
        await bridge.host.aclose()
        bridge.ledger.close()
