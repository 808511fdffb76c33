"""The Host's intent service directly (no HTTP): idempotency, arbitration, snapshots."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import pytest

from opennua.host import SessionHost
from opennua.protocol import (
    Accepted,
    AnswerInput,
    Cancel,
    Conflict,
    CreateSession,
    IntentResult,
    ReportDelivery,
    RetryTurn,
    SendMessage,
    action_from_dict,
    action_id,
    replay,
    state_to_json,
)
from opennua.protocol.actions import TextPart
from tests.server._harness import Env, environment, park_for_input


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with environment(f"sqlite:///{tmp_path}/nua.db", tmp_path) as e:
        yield e


def _msg(key: str, text: str = "hi", **extra: Any) -> SendMessage:
    return SendMessage(intent_id=key, client_id="cli_a", content=[TextPart(text=text)], **extra)


async def _accept(result: Awaitable[IntentResult]) -> Accepted:
    accepted = await result
    assert isinstance(accepted, Accepted), accepted
    return accepted


async def _session(host: SessionHost, key: str = "int_s") -> str:
    result = await host.submit(None, CreateSession(intent_id=key, client_id="cli_a", title="t"))
    assert result.type == "accepted"
    return result.ids["session_id"]


async def test_create_session_is_idempotent(env: Env) -> None:
    first = await _session(env.host)
    assert await _session(env.host) == first
    assert len((await env.store.list_session_summaries()).items) == 1
    other = CreateSession(intent_id="int_s", client_id="cli_a", title="other")
    reused = await env.host.submit(None, other)
    assert reused.type == "rejected" and reused.code == "idempotency_key_reused"


async def test_accepted_message_is_one_unit_with_deterministic_ids(env: Env) -> None:
    sid = await _session(env.host)
    result = await _accept(env.host.submit(sid, _msg("int_m")))
    # One action: `turn.started` opens the turn queued; no `turn.state` repeats it.
    (started,) = await env.host.history(sid, after=1)
    assert started["id"] == action_id(f"host:{sid}", "int_m/turn.started")
    assert started["ts"] == "2027-01-15T08:00:00.000Z"
    execution = await env.store.get_execution(result.ids["execution_id"])
    assert (execution.snapshot_digest or "").startswith("sha256:")
    assert execution.deadline_at == env.clock() + 3600
    assert execution.trigger["kind"] == "message" and execution.trigger["client_id"] == "cli_a"
    # Replaying the intent returns the stored result and appends nothing.
    assert await env.host.submit(sid, _msg("int_m")) == result
    assert len(await env.host.history(sid)) == 2


async def test_rejections_are_not_stored_so_the_key_can_be_retried(env: Env) -> None:
    sid = await _session(env.host)
    first = await _accept(env.host.submit(sid, _msg("int_1")))
    busy = await env.host.submit(sid, _msg("int_2", if_busy="reject"))
    assert busy.type == "rejected" and busy.code == "session_busy"
    await env.host.submit(sid, Cancel(intent_id="int_c", client_id="cli_a"))
    claimed = await env.store.claim("sup", env.clock(), 15)
    assert claimed is not None
    async with env.store.fenced(first.ids["execution_id"], claimed.epoch) as tx:
        tx.finish("cancelled", now=env.clock())
    again = await env.host.submit(sid, _msg("int_2", if_busy="reject"))
    assert again.type == "accepted"


async def test_a_failure_before_commit_releases_the_key(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = await _session(env.host)
    real = env.store.transaction

    def broken() -> Any:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(env.store, "transaction", broken)
    with pytest.raises(RuntimeError):
        await env.host.submit(sid, _msg("int_x"))
    monkeypatch.setattr(env.store, "transaction", real)
    assert (await env.host.submit(sid, _msg("int_x"))).type == "accepted"


async def test_cancel_unknown_or_idle(env: Env) -> None:
    sid = await _session(env.host)
    idle = await env.host.submit(sid, Cancel(intent_id="int_c1", client_id="cli_a"))
    assert idle.type == "rejected" and idle.code == "turn_not_active"
    missing = await env.host.submit(sid, Cancel(intent_id="int_c2", client_id="c", turn_id="trn_x"))
    assert missing.type == "rejected" and missing.code == "not_found"
    nowhere = await env.host.submit("ses_nowhere", _msg("int_n"))
    assert nowhere.type == "rejected" and nowhere.code == "not_found"


async def test_the_person_a_client_answered_for_is_recorded_and_told_to_the_loser(
    env: Env,
) -> None:
    # A CLI that lost to the chat bridge was told the bridge's client id, not that
    # @alice answered in chat (issue 35).
    options = [{"option_id": "ok", "name": "OK", "kind": "allow_once"}]
    sid = await _session(env.host)
    first = await _accept(env.host.submit(sid, _msg("int_1")))
    rid = await park_for_input(
        env, sid, first.ids["execution_id"], first.ids["turn_id"], options=options
    )
    chat = AnswerInput(
        intent_id="int_chat",
        client_id="cli_bridge",
        request_id=rid,
        option_id="ok",
        on_behalf_of="@alice:example.org",
    )
    won = await _accept(env.host.submit(sid, chat))
    cli = AnswerInput(intent_id="int_cli", client_id="cli_desk", request_id=rid, option_id="ok")
    lost = await env.host.submit(sid, cli)
    by = {
        "client_id": "cli_bridge",
        "principal_id": "prn_owner",
        "on_behalf_of": "@alice:example.org",
    }
    assert isinstance(lost, Conflict) and lost.resolution["answered_by"] == by
    _, state = await env.host.snapshot(sid)
    assert state["turns"][-1]["input_requests"][rid]["answered_by"] == by
    assert won.resolution is not None and won.resolution["answered_by"] == by


async def test_answer_after_cancel_is_gone_and_conflict_is_replayed(env: Env) -> None:
    options = [{"option_id": "ok", "name": "OK", "kind": "allow_once"}]
    sid = await _session(env.host)
    first = await _accept(env.host.submit(sid, _msg("int_1")))
    eid, tid = first.ids["execution_id"], first.ids["turn_id"]
    rid = await park_for_input(env, sid, eid, tid, options=options)
    win = await env.host.submit(
        sid, AnswerInput(intent_id="int_a1", client_id="cli_a", request_id=rid, option_id="ok")
    )
    assert win.type == "accepted"
    lose = AnswerInput(intent_id="int_a2", client_id="cli_b", request_id=rid, option_id="ok")
    lost = await env.host.submit(sid, lose)
    assert isinstance(lost, Conflict)
    assert lost.resolution["answered_by"] == {
        "client_id": "cli_a",
        "principal_id": "prn_owner",
        "on_behalf_of": None,
    }
    assert await env.host.submit(sid, lose) == lost

    second = await _accept(env.host.submit(sid, _msg("int_2")))
    # Finish the first execution so the second can be claimed and parked.
    claimed = await env.store.claim("sup", env.clock(), 15)
    assert claimed is not None and claimed.execution.execution_id == eid
    async with env.store.fenced(eid, claimed.epoch) as tx:
        tx.finish("completed", now=env.clock())
    rid2 = await park_for_input(
        env, sid, second.ids["execution_id"], second.ids["turn_id"], options=options
    )
    await env.host.submit(sid, Cancel(intent_id="int_c", client_id="cli_a"))
    assert (await env.store.get_input_request(rid2)).status == "cancelled"
    _, state = await env.host.snapshot(sid)
    assert state["open_input_requests"] == []
    late = AnswerInput(intent_id="int_a3", client_id="cli_a", request_id=rid2, option_id="ok")
    gone = await env.host.submit(sid, late)
    assert gone.type == "rejected" and gone.code == "gone"
    elsewhere = await _session(env.host, "int_s2")
    foreign = AnswerInput(intent_id="int_a4", client_id="c", request_id=rid2, option_id="ok")
    wrong = await env.host.submit(elsewhere, foreign)
    assert wrong.type == "rejected" and wrong.code == "not_found"


async def test_retry_of_unknown_turn(env: Env) -> None:
    sid = await _session(env.host)
    result = await env.host.submit(sid, RetryTurn(intent_id="r", client_id="c", turn_id="t"))
    assert result.type == "rejected" and result.code == "not_found"


async def test_snapshot_is_stored_every_500_actions_and_equals_replay(env: Env) -> None:
    sid = await _session(env.host)
    filler = [
        {
            "v": 1,
            "session_id": sid,
            "id": f"act_fill_{i}",
            "type": "test.filler",
            "ts": "2027-01-15T08:00:00.000Z",
            "data": {},
        }
        for i in range(600)
    ]
    await env.store.append(sid, filler)
    seq, state = await env.host.snapshot(sid)
    assert seq == 601
    stored = await env.store.get_snapshot(sid)
    assert stored is not None and stored.seq == 601
    await env.host.submit(sid, _msg("int_m"))
    seq, state = await env.host.snapshot(sid)
    assert seq == 602
    stored = await env.store.get_snapshot(sid)
    assert stored is not None and stored.seq == 601  # not yet: no turn ended
    # A fresh host (no cache) starts from the stored snapshot and reduces the tail.
    fresh = SessionHost(env.store, env.hub, clock=env.clock)
    _, cold = await fresh.snapshot(sid)
    everything = [action_from_dict(a) for a in await env.store.read(sid, 0, 10_000)]
    assert state_to_json(cold) == state_to_json(state) == state_to_json(replay(everything))


async def test_late_answer_after_the_deadline_sweep_is_gone(env: Env) -> None:
    options = [{"option_id": "ok", "name": "OK", "kind": "allow_once"}]
    sid = await _session(env.host)
    sent = await _accept(env.host.submit(sid, _msg("int_1")))
    rid = await park_for_input(
        env, sid, sent.ids["execution_id"], sent.ids["turn_id"], options=options
    )
    env.clock.advance(3601)
    ended = await env.store.sweep_deadlines(env.clock(), lambda e, expired: [])
    assert [e.status for e, _ in ended] == ["deadline_exceeded"]
    late = AnswerInput(intent_id="int_a", client_id="cli_a", request_id=rid, option_id="ok")
    result = await env.host.submit(sid, late)
    assert result.type == "rejected" and result.code == "gone"


async def test_concurrent_reject_messages_start_one_turn(env: Env) -> None:
    import asyncio

    sid = await _session(env.host)
    results = await asyncio.gather(
        *(env.host.submit(sid, _msg(f"int_{i}", if_busy="reject")) for i in range(10))
    )
    assert sorted(r.type for r in results) == ["accepted"] + ["rejected"] * 9
    assert len(await env.store.list_executions(sid)) == 1


def _report(key: str, status: str, attempts: int = 0, **extra: Any) -> ReportDelivery:
    return ReportDelivery(
        intent_id=key,
        client_id="cli_bridge",
        delivery_id="dlv_card",
        channel="matrix",
        target="!room:hs",
        kind="message",
        status=status,  # type: ignore[arg-type]
        attempts=attempts,
        **extra,
    )


async def test_a_delivery_report_is_appended_once_and_closed_once_sent(env: Env) -> None:
    sid = await _session(env.host)
    await _accept(env.host.submit(sid, _report("int_d1", "pending")))
    error = {"code": "unreachable", "message": "refused"}
    retrying = _report("int_d2", "retrying", 1, error=error, next_attempt_at="2027-01-15T08:00:02Z")
    await _accept(env.host.submit(sid, retrying))
    sent = _report("int_d3", "sent", 2, event_id="$ev")
    await _accept(env.host.submit(sid, sent))
    # A retransmitted report is the stored result, not a second action.
    await _accept(env.host.submit(sid, sent))
    actions = [a for a in await env.host.history(sid) if a["type"] == "delivery.updated"]
    assert [a["data"]["status"] for a in actions] == ["pending", "retrying", "sent"]
    assert actions[0]["client_id"] == "cli_bridge"
    late = await env.host.submit(sid, _report("int_d4", "retrying", 3))
    assert late.type == "rejected" and late.code == "delivery_closed"
    _, state = await env.host.snapshot(sid)
    delivery = state["deliveries"]["dlv_card"]
    assert delivery["status"] == "sent" and delivery["event_id"] == "$ev"
    assert [h["attempts"] for h in delivery["history"]] == [0, 1, 2]
    assert delivery["history"][1]["error"] == error


async def test_a_delivery_report_for_an_unknown_session_is_not_found(env: Env) -> None:
    result = await env.host.submit("ses_nope", _report("int_d", "pending"))
    assert result.type == "rejected" and result.code == "not_found"
