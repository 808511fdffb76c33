"""Subscription and intent mechanics against a scripted transport: reconnect from the last
seq, resync by snapshot (or by history), retransmission with the same key, typed errors."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import httpx
import pytest

from opennua.client import (
    ActionEvent,
    ApiError,
    Backoff,
    Client,
    ConflictError,
    ConnectionEvent,
    GoneError,
    IntegrityError,
    InvalidRequestError,
    NotFoundError,
    ResyncEvent,
    ServerError,
    UnauthorizedError,
    UnreachableError,
    connect,
)
from opennua.protocol import action_from_dict, replay, state_to_json
from tests.client._fakes import SID, FakeServer, titles, turn_started

pytestmark = pytest.mark.timeout(20)


def _client(server: FakeServer, sleeps: list[float] | None = None) -> Client:
    async def sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)

    return connect(
        "http://fake",
        "tok",
        client_id="cli_test",
        transport=server.transport(),
        backoff=Backoff(rng=random.Random(1)),
        sleep=sleep,
        intent_timeout=5,
    )


async def _collect(live: object, count: int) -> list[object]:
    events = []
    async for event in live:  # type: ignore[attr-defined]
        events.append(event)
        if len(events) == count:
            break
    return events


async def test_reconnect_resumes_after_the_last_seq_it_reduced() -> None:
    server = FakeServer(titles(6), streams=[[1, 2, 3, "drop"], ["drop"], [4, 5, 6, "hold"]])
    sleeps: list[float] = []
    async with _client(server, sleeps) as client, client.session(SID).subscribe(0) as live:
        events = await _collect(live, 10)
        state = live.state
    seqs = [e.action.seq for e in events if isinstance(e, ActionEvent)]
    assert seqs == [1, 2, 3, 4, 5, 6]
    connection = [e.status for e in events if isinstance(e, ConnectionEvent)]
    # The second connection opened, then broke before any action: both are reported.
    assert connection == ["disconnected", "connected", "disconnected", "connected"]
    assert server.event_afters == [0, 3, 3]
    # Consecutive failures back off further; success resets nothing in between here.
    assert len(sleeps) == 2 and 0.05 <= sleeps[0] <= 0.2 and 0.1 <= sleeps[1] <= 0.4
    expected = replay(action_from_dict(a) for a in server.log)
    assert state_to_json(state) == state_to_json(expected)
    assert live.reconnects == 2


async def test_a_gap_resyncs_from_a_snapshot_and_continues_after_it() -> None:
    server = FakeServer(titles(6), streams=[[1, 2, 5], [7, "hold"]])
    async with _client(server) as client, client.session(SID).subscribe(0) as live:
        events = await _collect(live, 3)
        assert isinstance(events[2], ResyncEvent)
        assert (events[2].from_seq, events[2].to_seq) == (2, 6)
        assert state_to_json(live.state) == state_to_json(
            replay(action_from_dict(a) for a in server.log)
        )
        server.log = server.log + titles(7, start=7)
        (after,) = await _collect(live, 1)
    assert isinstance(after, ActionEvent) and after.action.seq == 7
    assert server.event_afters == [0, 6]
    assert live.resyncs == 1


async def test_a_resync_frame_with_replay_gaps_pages_every_missed_action() -> None:
    server = FakeServer(titles(7), streams=[[1, 2, "resync"], [7, "hold"]])
    client = _client(server)
    async with client, client.session(SID).subscribe(0, replay_gaps=True) as live:
        events = await _collect(live, 7)
    assert [e.action.seq for e in events if isinstance(e, ActionEvent)] == list(range(1, 8))
    assert not any(isinstance(e, ResyncEvent) for e in events)


async def test_subscribe_after_n_rebuilds_the_state_up_to_n_and_yields_only_later_actions() -> None:
    server = FakeServer(titles(5), streams=[[4, 5, "hold"]])
    async with _client(server) as client, client.session(SID).subscribe(3) as live:
        assert live.state["seq"] == 3 and live.state["title"] == "t3"
        events = await _collect(live, 2)
    assert [e.action.seq for e in events] == [4, 5]  # type: ignore[attr-defined]
    assert server.event_afters == [3]


async def test_an_intent_whose_response_was_lost_is_retransmitted_with_the_same_key() -> None:
    path = f"/v1/sessions/{SID}/messages"
    accepted = httpx.Response(202, json={"turn_id": "trn_1", "execution_id": "exe_1"})
    server = FakeServer(titles(1), posts={path: [httpx.ReadTimeout("lost"), accepted]})
    async with _client(server) as client:
        session = client.session(SID)
        result = await session.send_message("hi")
    assert result.ids == {"turn_id": "trn_1", "execution_id": "exe_1"}
    keys = [p["key"] for p in server.performed]
    assert len(keys) == 2 and keys[0] == keys[1] == result.intent_id
    assert server.performed[0]["body"] == server.performed[1]["body"]
    assert server.performed[0]["body"]["intent_id"] == result.intent_id
    assert session.local.pending_messages()[0].turn_id == "trn_1"


async def test_request_in_flight_is_retried_but_a_rejection_rolls_the_overlay_back() -> None:
    path = f"/v1/sessions/{SID}/messages"
    in_flight = httpx.Response(409, json={"code": "request_in_flight", "detail": "running"})
    busy = httpx.Response(409, json={"code": "session_busy", "detail": "a turn is active"})
    server = FakeServer(titles(1), posts={path: [in_flight, busy]})
    async with _client(server) as client:
        session = client.session(SID)
        with pytest.raises(ConflictError) as caught:
            await session.send_message("hi", if_busy="reject")
    assert caught.value.code == "session_busy"
    assert len(server.performed) == 2
    assert session.local.pending_messages() == []
    assert [r.code for r in session.local.rolled_back] == ["session_busy"]


async def test_retransmission_gives_up_as_unreachable_after_the_intent_timeout() -> None:
    path = f"/v1/sessions/{SID}/cancel"
    server = FakeServer(titles(1), posts={path: [httpx.ConnectError("refused")]})
    client = _client(server)
    client.intent_timeout = 0
    async with client:
        with pytest.raises(UnreachableError):
            await client.session(SID).cancel()


async def test_a_refused_connection_before_the_server_ever_answered_is_final_at_once() -> None:
    # `nua run` with no server retried for 34 s (issue 35): nobody listens there.
    path = f"/v1/sessions/{SID}/messages"
    server = FakeServer(titles(1), posts={path: [httpx.ConnectError("refused")]})
    sleeps: list[float] = []
    async with _client(server, sleeps) as client:
        with pytest.raises(UnreachableError):
            await client.session(SID).send_message("hi")
    assert len(server.performed) == 1 and sleeps == []


async def test_a_refused_connection_after_an_answer_is_a_restart_and_is_retried() -> None:
    path = f"/v1/sessions/{SID}/messages"
    accepted = httpx.Response(202, json={"turn_id": "trn_1", "execution_id": "exe_1"})
    refused = httpx.ConnectError("refused")
    server = FakeServer(titles(1), posts={path: [refused, refused, accepted]})
    async with _client(server) as client:
        await client.request("GET", f"/v1/sessions/{SID}")
        result = await client.session(SID).send_message("hi")
    assert result.ids["turn_id"] == "trn_1" and len(server.performed) == 3


@pytest.mark.parametrize(("status", "retried"), [(503, True), (502, True), (500, False)])
async def test_only_a_server_error_that_may_pass_is_retried(status: int, retried: bool) -> None:
    path = f"/v1/sessions/{SID}/messages"
    accepted = httpx.Response(202, json={"turn_id": "trn_1", "execution_id": "exe_1"})
    failed = httpx.Response(status, json={"code": "x", "detail": "d", "status": status})
    server = FakeServer(titles(1), posts={path: [failed, accepted]})
    async with _client(server) as client:
        if retried:
            await client.session(SID).send_message("hi")
        else:
            with pytest.raises(ServerError):
                await client.session(SID).send_message("hi")
    assert len(server.performed) == (2 if retried else 1)


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [
        (401, "unauthorized", UnauthorizedError),
        (404, "not_found", NotFoundError),
        (409, "input_request_resolved", ConflictError),
        (410, "gone", GoneError),
        (422, "validation_error", InvalidRequestError),
        (500, "internal_error", ServerError),
    ],
)
async def test_problem_responses_become_typed_errors(
    status: int, code: str, kind: type[ApiError]
) -> None:
    resolution = {
        "request_id": "req_1",
        "outcome": "selected",
        "option_id": "allow_once",
        "answered_by": {"client_id": "cli_first", "principal_id": "prn_owner"},
    }
    body = {"code": code, "detail": "x", "status": status, "resolution": resolution}
    path = f"/v1/sessions/{SID}/input-requests/req_1/answer"
    server = FakeServer(titles(1), posts={path: [httpx.Response(status, json=body)]})
    client = _client(server)
    client.intent_timeout = 0
    async with client:
        with pytest.raises(kind) as caught:
            await client.session(SID).answer("req_1", option_id="allow_once")
    error = caught.value
    assert error.code == code and error.status == status
    if isinstance(error, ConflictError):
        assert error.answered_by == {"client_id": "cli_first", "principal_id": "prn_owner"}
        assert (error.resolution or {})["option_id"] == "allow_once"


async def test_an_artifact_whose_bytes_do_not_match_its_sha256_is_never_written(
    tmp_path: Path,
) -> None:
    good = b"# Report\n"
    meta = {"artifact_id": "art_1", "name": "r.md", "size": 9}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/content"):
            return httpx.Response(200, content=b"# Tampered")
        return httpx.Response(200, json=meta | {"sha256": hashlib.sha256(good).hexdigest()})

    async with connect("http://fake", "t", transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(IntegrityError):
            await client.save_artifact("art_1", tmp_path / "r.md")
        with pytest.raises(IntegrityError):
            await client.read_artifact("art_1")
    assert not (tmp_path / "r.md").exists()
    assert not any(p.name.endswith(".part") for p in tmp_path.iterdir())  # noqa: ASYNC240


async def test_the_overlay_is_dropped_when_its_turn_started_arrives_live() -> None:
    log = [*titles(1), turn_started(2, "trn_1", "int_fixed")]
    path = f"/v1/sessions/{SID}/messages"
    accepted = httpx.Response(202, json={"turn_id": "trn_1", "execution_id": "exe_1"})
    server = FakeServer(log[:1], streams=[[2, "hold"]], posts={path: [accepted]})
    async with _client(server) as client:
        session = client.session(SID)
        async with session.subscribe() as live:
            await session.send_message("hi", intent_id="int_fixed")
            assert [p.status for p in session.local.pending_messages()] == ["accepted"]
            server.log.append(log[1])
            events = await _collect(live, 1)
            assert events[0].action.intent_id == "int_fixed"  # type: ignore[attr-defined]
            assert session.local.pending_messages() == []


async def test_every_id_is_sent_as_one_path_segment() -> None:
    server = FakeServer(titles(1))
    async with _client(server) as client:
        for odd in ("ses_\x1b[2J", "../x", "..", "a b?c#d/e"):
            with pytest.raises(NotFoundError):
                await client.session(odd).snapshot()
            with pytest.raises(NotFoundError):
                await client.execution(odd)
    paths = [r.url.raw_path.decode() for r in server.requests]
    assert paths == [
        "/v1/sessions/ses_%1B%5B2J",
        "/v1/executions/ses_%1B%5B2J",
        "/v1/sessions/..%2Fx",
        "/v1/executions/..%2Fx",
        "/v1/sessions/%2E%2E",
        "/v1/executions/%2E%2E",
        "/v1/sessions/a%20b%3Fc%23d%2Fe",
        "/v1/executions/a%20b%3Fc%23d%2Fe",
    ]
