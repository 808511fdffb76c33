"""The Matrix bridge end to end: real Synapse, real `nua serve`, the bridge as its own
process, and a person on matrix-nio. What the room shows is read from the homeserver."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from benchmarks.bridge import run as run_benchmark

from opennua.bridge._bridge import BridgeConfig, MatrixBridge
from opennua.bridge._deliveries import DeliveryState
from opennua.bridge._ledger import Outgoing
from tests._support.polling import until
from tests.server._serve_proc import Served

from ._matrix_env import (
    BridgeProc,
    Person,
    Synapse,
    deliveries_settled,
    edits_of,
    from_bot,
    new_messages,
    request_message,
    session_of,
    session_state,
    shown,
    turn_ended,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]


async def test_a_turn_from_the_room_edits_one_card_approves_by_reaction_and_reports(
    synapse: Synapse, served: Served, bridge: BridgeProc, alice: Person
) -> None:
    bot = synapse.bot["user_id"]
    room = await alice.dm(bot)
    await alice.say(room, "Write a short report")
    request = await request_message(alice, room, bot)
    await alice.react(room, request["event_id"], "✅")
    sid = session_of(served, room)
    await turn_ended(served, sid)
    state = await deliveries_settled(served, sid)

    async def final_card() -> list[dict[str, Any]] | None:
        events = await alice.events(room)
        cards = [
            e for e in new_messages(from_bot(events, bot)) if e["event_id"] != request["event_id"]
        ]
        card = next(e for e in cards if e["content"]["msgtype"] == "m.notice")
        return events if "✅ Done" in shown(events, card) else None

    events = await until(final_card, 60, interval=0.3, what="the card never showed the end")
    mine = from_bot(events, bot)
    bubbles = new_messages(mine)
    kinds = sorted(e["content"]["msgtype"] for e in bubbles)
    # One card, one request, one file: every step of the turn was an edit, not a message.
    assert kinds == ["m.file", "m.notice", "m.notice"], [e["content"]["body"] for e in bubbles]
    card = next(e for e in bubbles if e["content"]["msgtype"] == "m.notice" and e != request)
    card_edits = edits_of(events, card["event_id"])
    assert len(card_edits) >= 2
    final = shown(events, card)
    assert "Plan" in final and "Usage:" in final and "researcher" in final
    # The request message now says who answered, and with what.
    assert f"Answered by {alice.user_id} in chat" in shown(events, request)
    # The report arrives as a file, with its sha256.
    file_event = next(e for e in bubbles if e["content"]["msgtype"] == "m.file")
    artifact = next(iter(state["artifacts"].values()))
    assert file_event["content"]["org.opennua.sha256"] == artifact["sha256"]
    assert artifact["sha256"] in file_event["content"]["body"]
    # The Host's log agrees: the answer came from the bridge, every delivery was sent once.
    resolution = next(iter(state["turns"][-1]["input_requests"].values()))
    assert resolution["outcome"] == "selected" and resolution["option_id"].startswith("allow")
    # ... for the person in the room, whom every client names (issue 35).
    assert resolution["answered_by"]["on_behalf_of"] == alice.user_id
    sent = {d["event_id"] for d in state["deliveries"].values()}
    assert {card["event_id"], request["event_id"], file_event["event_id"]} <= sent
    assert len(sent) == len(mine)  # every bot event is a delivery the Host knows of
    # `nua show` lists them.
    code, shown_cli, _ = await _nua(served, "show", sid)
    assert code == 0
    assert "deliveries" in shown_cli and "matrix card" in shown_cli and " sent " in shown_cli
    assert f"answered by {alice.user_id} (via " in shown_cli


async def _nua(served: Served, *args: str) -> tuple[int, str, str]:
    """Run the CLI against `served`: (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "opennua.cli", "--data", str(served.data), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _replies_to(events: list[dict[str, Any]], event_id: str) -> list[dict[str, Any]]:
    return [
        e
        for e in events
        if ((e["content"].get("m.relates_to") or {}).get("m.in_reply_to") or {}).get("event_id")
        == event_id
    ]


async def _reply_to(alice: Person, room: str, event_id: str, bot: str) -> str:
    async def find() -> str | None:
        replies = _replies_to(from_bot(await alice.events(room), bot), event_id)
        return str(replies[0]["content"]["body"]) if replies else None

    return await until(find, 60, interval=0.3, what=f"no reply to {event_id}")


async def test_the_cli_and_the_room_answer_at_once_one_wins_and_the_loser_is_told(
    synapse: Synapse, served: Served, bridge: BridgeProc, alice: Person
) -> None:
    bot = synapse.bot["user_id"]
    room = await alice.dm(bot)
    await alice.say(room, "Write a short report")
    request = await request_message(alice, room, bot)
    sid = session_of(served, room)
    rid = next(iter(session_state(served, sid)["turns"][-1]["input_requests"]))
    # Both at once: the desk's CLI chooses reject, the room's person chooses allow.
    cli = asyncio.create_task(
        _nua(served, "--client-id", "cli_desk", "answer", sid, rid, "--option", "reject_once")
    )
    answer = await alice.say(room, "1", reply_to=request["event_id"])
    code, _, err = await cli

    async def resolved() -> dict[str, Any] | None:
        state = session_state(served, sid)
        found = state["turns"][-1]["input_requests"][rid]
        return found if found["status"] == "resolved" else None

    resolution = await until(resolved, 60, interval=0.3, what="the request was never resolved")

    async def request_edited() -> str | None:
        text = shown(await alice.events(room), request)
        return text if "Answered by" in text else None

    text = await until(
        request_edited, 60, interval=0.3, what="the request message never said who answered"
    )
    if resolution["answered_by"]["client_id"] == "cli_desk":
        assert code == 0, err
        assert resolution["option_id"] == "reject_once"
        assert "cli_desk (web UI or CLI): Reject" in text
        late = await _reply_to(alice, room, answer, bot)
        assert late.startswith("Too late") and "cli_desk" in late
    else:
        # The room won: the CLI is told with the documented conflict exit code.
        assert code == 4, err
        # The person who answered in chat, not the bridge's client id (issue 35).
        assert f"already answered by {alice.user_id}" in err
        assert resolution["answered_by"]["on_behalf_of"] == alice.user_id
        assert resolution["option_id"].startswith("allow")
        assert f"Answered by {alice.user_id} in chat" in text
    await deliveries_settled(served, sid)


async def test_kill_9_mid_turn_and_restart_posts_nothing_twice(
    synapse: Synapse, served: Served, bridge: BridgeProc, alice: Person
) -> None:
    bot = synapse.bot["user_id"]
    room = await alice.dm(bot)
    await alice.say(room, "Write a short report")

    async def card_edited() -> bool:
        events = await alice.events(room)
        cards = new_messages(from_bot(events, bot))
        return bool(cards) and bool(edits_of(events, cards[0]["event_id"]))

    await until(card_edited, 60, interval=0.3, what="the card was never edited")
    bridge.kill9()
    sid = session_of(served, room)
    # The agent does not wait for the bridge: the turn reaches its approval meanwhile.
    await until(
        lambda: _async(session_state(served, sid)["status"] == "requires_action"),
        60,
        "the turn did not go on without the bridge",
    )
    bridge.start()
    request = await request_message(alice, room, bot)
    await alice.react(room, request["event_id"], "✅")
    await turn_ended(served, sid)
    state = await deliveries_settled(served, sid)

    async def final() -> list[dict[str, Any]] | None:
        events = await alice.events(room)
        card = new_messages(from_bot(events, bot))[0]
        return events if "✅ Done" in shown(events, card) else None

    events = await until(
        final, 60, interval=0.3, what="the card did not continue after the restart"
    )
    mine = from_bot(events, bot)
    bubbles = new_messages(mine)
    assert sorted(e["content"]["msgtype"] for e in bubbles) == ["m.file", "m.notice", "m.notice"]
    reactions = [(e["content"]["m.relates_to"]["event_id"], e["content"]["m.relates_to"]["key"])
                 for e in mine if e["type"] == "m.reaction"]  # fmt: skip
    assert len(reactions) == len(set(reactions)) == 2
    bodies = [shown(events, e) for e in edits_of(events, bubbles[0]["event_id"])]
    assert len(bodies) == len(set(bodies)), "an edit was posted twice"
    assert len({d["event_id"] for d in state["deliveries"].values()}) == len(mine)


async def _async(value: bool) -> bool:
    return value


async def test_a_reaction_to_a_request_sent_by_a_killed_bridge_before_its_record_is_answered(
    synapse: Synapse, alice: Person, tmp_path: Path
) -> None:
    """kill -9 between a send and its record leaves the request in the room and its
    delivery open in the ledger. A reaction the next process reads before sending it again
    is still an answer: the homeserver names the delivery by this device's transaction id.
    A reaction to someone else's message is not."""
    bot = synapse.bot
    created = await alice.client.room_create(is_direct=True, invite=[bot["user_id"]])
    room = created.room_id  # type: ignore[union-attr]
    config = BridgeConfig(
        homeserver=synapse.hs.url, user_id=bot["user_id"], token=bot["access_token"],
        host_url="http://127.0.0.1:9", host_token=None, state_path=tmp_path / "bridge.db",
    )  # fmt: skip
    killed = MatrixBridge(config)
    state = DeliveryState("dlv_request_1", "ses_a", room, "request", "pending")
    content = {"msgtype": "m.notice", "body": "✋ Approve?"}
    request = Outgoing(state, "m.room.message", content, None, "req_1")
    try:
        await killed.matrix.join(room)
        assert killed.outbox.enqueue(request)
        # The send the killed process made: its answer was never read.
        event_id = await killed.matrix.send(room, "m.room.message", "dlv_request_1", content)
    finally:
        await killed.matrix.aclose()
        await killed.host.aclose()
        killed.ledger.close()

    restarted = MatrixBridge(config)
    answered: list[tuple[str, str, str | None]] = []

    async def answer(room: str, event: Any, sender: str, sid: str, rid: str, **kw: Any) -> None:
        answered.append((sid, rid, kw.get("reaction")))

    restarted._answer = answer  # type: ignore[method-assign]
    own = await alice.say(room, "a message of alice's")
    try:
        for target, reaction_id in ((own, "$to_alice"), (event_id, "$to_request")):
            reaction = {
                "type": "m.reaction", "sender": alice.user_id, "event_id": reaction_id,
                "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": target,
                                             "key": "✅"}},
            }  # fmt: skip
            await restarted._on_event(room, reaction)
        assert answered == [("ses_a", "req_1", "✅")]
    finally:
        await restarted.matrix.aclose()
        await restarted.host.aclose()
        restarted.ledger.close()


async def test_synapse_down_30_s_deliveries_retry_the_agent_finishes_then_all_are_sent(
    synapse: Synapse, served: Served, bridge: BridgeProc, alice: Person
) -> None:
    bot = synapse.bot["user_id"]
    room = await alice.dm(bot)
    await alice.say(room, "Write a short report")
    request = await request_message(alice, room, bot)
    await alice.react(room, request["event_id"], "✅")
    sid = session_of(served, room)
    await until(
        lambda: _async(not session_state(served, sid)["open_input_requests"]),
        60,
        "the reaction was never taken as the answer",
    )
    synapse.stop()
    down_at = asyncio.get_running_loop().time()
    try:
        state = await turn_ended(served, sid)  # the agent finishes while the homeserver is gone

        async def retrying() -> dict[str, Any] | None:
            state = session_state(served, sid)
            waiting = [d for d in state["deliveries"].values() if d["status"] == "retrying"]
            return state if waiting else None

        state = await until(retrying, 60, interval=0.3, what="no delivery went retrying")
        assert state["turns"][-1]["stop_reason"] == "end_turn"
        waiting = [d for d in state["deliveries"].values() if d["status"] == "retrying"]
        assert all(d["error"] is not None and d["next_attempt_at"] for d in waiting)
        await asyncio.sleep(max(0.0, 30 - (asyncio.get_running_loop().time() - down_at)))
    finally:
        synapse.start()
    state = await deliveries_settled(served, sid)
    retried = [d for d in state["deliveries"].values() if d["attempts"] > 1]
    assert retried, "no delivery needed a second attempt"
    for d in retried:
        statuses = [h["status"] for h in d["history"]]
        assert statuses[0] == "pending" and statuses[-1] == "sent" and "retrying" in statuses
        assert [h["attempts"] for h in d["history"]] == sorted(h["attempts"] for h in d["history"])
    # The tool ran once: the delivery failures re-ran nothing.
    shell_calls = [c for c in state["turns"][-1]["tool_calls"].values() if c["name"] == "shell"]
    assert len(shell_calls) == 1


async def test_bad_input_in_chat_gets_a_clear_reply_and_changes_nothing(
    synapse: Synapse, served: Served, bridge: BridgeProc, alice: Person, mallory: Person
) -> None:
    bot = synapse.bot["user_id"]
    room = await alice.dm(bot)
    await alice.client.room_invite(room, mallory.user_id)
    await mallory.client.join(room)
    await alice.say(room, "Write a short report")
    request = await request_message(alice, room, bot)
    sid = session_of(served, room)
    before = session_state(served, sid)

    seven = await alice.say(room, "7", reply_to=request["event_id"])
    assert (await _reply_to(alice, room, seven, bot)).startswith("There is no option 7.")
    banana = await alice.say(room, "banana", reply_to=request["event_id"])
    assert "I don't know the option 'banana'" in await _reply_to(alice, room, banana, bot)
    # mallory's principal is a viewer of the workspace: she may follow, not steer.
    watcher = await mallory.say(room, "1", reply_to=request["event_id"])
    assert "may follow this session but not steer it (role viewer)" in await _reply_to(
        alice, room, watcher, bot
    )
    # Removed from the workspace, she is refused at once: the Host's facts, read afresh.
    with served.client() as http:
        http.delete(
            f"/v1/workspaces/{bridge.workspace}/members/{bridge.principals['mallory']}"
        ).raise_for_status()
    intruder = await mallory.say(room, "Delete everything")
    assert "is not a member of this session's workspace" in await _reply_to(
        alice, room, intruder, bot
    )
    command = await alice.say(room, "!frobnicate")
    assert "Unknown command" in await _reply_to(alice, room, command, bot)
    # A slash command the session's plugin does not have: the Host's refusal, said.
    slash = await alice.say(room, "/frobnicate now")
    assert (await _reply_to(alice, room, slash, bot)).startswith(
        "No command /frobnicate in this deployment (its commands: none)"
    )
    after = session_state(served, sid)
    assert len(after["turns"]) == len(before["turns"]) == 1
    assert after["open_input_requests"] == before["open_input_requests"]

    await alice.say(room, "2", reply_to=request["event_id"])  # reject: the turn goes on
    await turn_ended(served, sid)
    closed = await alice.say(room, "1", reply_to=request["event_id"])
    assert (await _reply_to(alice, room, closed, bot)).startswith("Too late")
    final = session_state(served, sid)
    resolution = final["turns"][0]["input_requests"][request_rid(final)]
    assert resolution["option_id"] == "reject_once"
    assert len(final["turns"]) == 1


def request_rid(state: dict[str, Any]) -> str:
    return str(next(iter(state["turns"][0]["input_requests"])))


async def test_a_long_turn_is_one_card_edited_at_the_throttle_rate(tmp_path: Path) -> None:
    """The short variant of benchmarks/bridge.py (which runs 2,000 actions)."""
    figures = await run_benchmark(actions=400, rate=100.0, edit_interval=1.0, work=tmp_path)
    assert figures.messages == 1, "every step after the first is an edit of the card"
    # One edit per interval, plus the final one; generous for a shared machine.
    assert 1 <= figures.edits <= figures.seconds / 1.0 + 2
    assert len(figures.lags) == 400
    assert max(figures.lags) < 1.0 + 5.0
