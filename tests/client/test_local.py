"""The local copy: confirmed state only from the reducer; the optimistic overlay beside it."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest

from opennua.client import Backoff, LocalSession
from opennua.client._sse import parse_sse
from opennua.protocol import SequenceGap, action_from_dict, replay, state_to_json
from tests.client._fakes import act, titles, turn_started


def test_actions_reduce_into_the_same_state_as_a_replay() -> None:
    log = titles(5)
    local = LocalSession()
    assert [local.apply(action_from_dict(a)) for a in log] == [True] * 5
    assert state_to_json(local.state) == state_to_json(replay(action_from_dict(a) for a in log))


def test_a_duplicate_is_ignored_and_a_gap_raises_without_changing_state() -> None:
    local = LocalSession()
    for raw in titles(3):
        local.apply(action_from_dict(raw))
    before = state_to_json(local.state)
    assert local.apply(action_from_dict(titles(3)[1])) is False
    with pytest.raises(SequenceGap):
        local.apply(action_from_dict(act(5, "session.updated", {"title": "x"})))
    assert state_to_json(local.state) == before


def test_overlay_is_kept_apart_and_dropped_by_the_authoritative_turn_started() -> None:
    local = LocalSession()
    local.apply(action_from_dict(titles(1)[0]))
    confirmed = state_to_json(local.state)
    local.propose("int_mine", [{"type": "text", "text": "hi"}])
    assert [p.text for p in local.pending_messages()] == ["hi"]
    assert state_to_json(local.state) == confirmed, "the overlay never enters the state"
    local.accept("int_mine", "trn_1")
    assert local.pending_messages()[0].status == "accepted"
    # Someone else's turn does not drop our overlay; ours (same intent_id) does.
    local.apply(action_from_dict(turn_started(2, "trn_other", "int_other")))
    assert [p.intent_id for p in local.pending_messages()] == ["int_mine"]
    local.apply(action_from_dict(turn_started(3, "trn_1", "int_mine")))
    assert local.pending_messages() == []
    assert local.state["anomalies"] == []


def test_overlay_is_rolled_back_on_rejection() -> None:
    local = LocalSession()
    local.propose("int_1", [{"type": "text", "text": "hello"}])
    local.reject("int_1", "session_busy", "a turn is already active")
    assert local.pending_messages() == []
    assert [(r.text, r.code) for r in local.rolled_back] == [("hello", "session_busy")]


def test_a_snapshot_that_already_holds_the_turn_drops_the_accepted_overlay() -> None:
    log = [titles(1)[0], turn_started(2, "trn_1", "int_1")]
    local = LocalSession()
    local.propose("int_1", [{"type": "text", "text": "hi"}])
    local.accept("int_1", "trn_1")
    local.reset(replay(action_from_dict(a) for a in log))
    assert local.pending_messages() == []
    # An intent still sending (no turn id yet) survives a snapshot.
    local.propose("int_2", [{"type": "text", "text": "again"}])
    local.reset(replay(action_from_dict(a) for a in log))
    assert [p.intent_id for p in local.pending_messages()] == ["int_2"]


def test_backoff_is_jittered_within_bounds_and_capped() -> None:
    backoff = Backoff(base=0.2, cap=5.0, rng=random.Random(7))
    delays = [backoff.delay(n) for n in range(12)]
    for n, delay in enumerate(delays):
        ceiling = min(5.0, 0.2 * 2**n)
        assert ceiling / 2 <= delay <= ceiling
    assert max(delays) <= 5.0
    again = Backoff(base=0.2, cap=5.0, rng=random.Random(7))
    assert [again.delay(n) for n in range(12)] == delays, "the random source decides"
    assert len({round(Backoff(rng=random.Random(s)).delay(4), 6) for s in range(20)}) > 10


async def test_sse_parser_skips_comments_and_joins_data_lines() -> None:
    async def lines() -> AsyncIterator[str]:
        for line in [
            ": connected",
            "",
            "id: 1",
            "event: action",
            'data: {"a":',
            "data: 1}",
            "",
            ": heartbeat",
            "",
            "event: resync",
            'data: {"seq": 9}',
            "",
        ]:
            yield line

    events = [e async for e in parse_sse(lines())]
    assert [(e.event, e.data, e.id) for e in events] == [
        ("action", '{"a":\n1}', "1"),
        ("resync", '{"seq": 9}', "1"),
    ]
