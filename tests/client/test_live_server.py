"""The Python client against real `nua serve` processes: live convergence, the overlay,
first-writer-wins, retransmission without a second effect, typed errors, and a
subscription that survives `kill -9` and a restart of the server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from opennua.client import (
    ActionEvent,
    ConflictError,
    ConnectionEvent,
    GoneError,
    InvalidRequestError,
    NotFoundError,
    UnauthorizedError,
    connect,
)
from opennua.protocol import SessionState, state_to_json
from tests.e2e._proc import Server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = Server(tmp_path_factory.mktemp("client"), step_delay="0.02").start()
    try:
        yield running
    finally:
        running.stop()


def _waiting(state: SessionState) -> bool:
    return bool(state["open_input_requests"])


def _ended(state: SessionState) -> bool:
    return bool(state["turns"]) and state["turns"][-1]["state"] == "ended"


async def test_live_state_converges_and_the_first_answer_wins(server: Server) -> None:
    async with (
        connect(server.url, server.token, client_id="cli_first") as first,
        connect(server.url, server.token, client_id="cli_second") as second,
    ):
        session = await first.create_session("live")
        async with session.subscribe() as live:
            accepted = await session.send_message("write the report", intent_id="int_live_1")
            # Until the authoritative turn.started arrives the message is only an overlay.
            overlay = [p.intent_id for p in session.local.pending_messages()]
            assert overlay in (["int_live_1"], [])
            started = None
            async for event in live:
                if isinstance(event, ActionEvent) and event.action.type == "turn.started":
                    started = event.action
                    break
            assert started is not None and started.intent_id == "int_live_1"
            assert started.turn_id == accepted.ids["turn_id"]
            assert session.local.pending_messages() == []
            state = await live.wait_for(_waiting)
            request_id = state["open_input_requests"][0]["request_id"]
            resolution = await session.answer(request_id, option_id="allow_once")
            assert resolution["answered_by"]["client_id"] == "cli_first"
            with pytest.raises(ConflictError) as lost:
                await second.session(session.session_id).answer(request_id, option_id="reject_once")
            me = await first.whoami()  # the answering principal, recorded
            assert lost.value.answered_by == {
                "client_id": "cli_first",
                "principal_id": me["principal_id"],
                "on_behalf_of": None,
            }
            assert (lost.value.resolution or {})["option_id"] == "allow_once"
            final = await live.wait_for(_ended)
        _, snapshot = await session.snapshot()
        assert state_to_json(final) == state_to_json(snapshot)
        assert final["turns"][0]["stop_reason"] == "end_turn"


class _LoseFirstResponse(httpx.AsyncBaseTransport):
    """Performs every request, but the first response to `path` never arrives."""

    def __init__(self, path: str) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.path = path
        self.sent: list[str | None] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.url.path == self.path:
            self.sent.append(request.headers.get("Idempotency-Key"))
            if len(self.sent) == 1:
                await response.aclose()
                raise httpx.ReadTimeout("the response was lost", request=request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_retransmitted_intent_never_creates_a_second_turn(server: Server) -> None:
    async with connect(server.url, server.token) as client:
        sid = (await client.create_session("idempotent")).session_id
    transport = _LoseFirstResponse(f"/v1/sessions/{sid}/messages")
    async with connect(server.url, server.token, transport=transport) as client:
        session = client.session(sid)
        accepted = await session.send_message("once")
        assert len(transport.sent) == 2 and transport.sent[0] == transport.sent[1]
        # The caller retransmitting the same intent on its own is just as harmless.
        again = await session.send_message("once", intent_id=accepted.intent_id)
        assert again.ids == accepted.ids
        async with session.subscribe() as live:
            state = await live.wait_for(_waiting)
        assert [t["turn_id"] for t in state["turns"]] == [accepted.ids["turn_id"]]
        request_id = state["open_input_requests"][0]["request_id"]
        first = await session.answer(request_id, option_id="allow_once", intent_id="int_ans_1")
        replayed = await session.answer(request_id, option_id="allow_once", intent_id="int_ans_1")
        assert first == replayed
        await session.cancel()


async def test_a_client_tool_is_called_as_an_input_request_and_its_result_is_used(
    server: Server,
) -> None:
    colour = {
        "name": "pick_colour",
        "description": "Ask the user for a colour",
        "parameters": {"type": "object", "properties": {"hint": {"type": "string"}}},
    }
    async with connect(server.url, server.token) as client:
        session = await client.create_session("client tools")
        await session.send_message("pick one", client_tools=[colour])
        async with session.subscribe() as live:
            state = await live.wait_for(_waiting)
            [waiting] = state["open_input_requests"]
            turn = state["turns"][-1]
            assert turn["client_tools"] == [colour]
            request = turn["input_requests"][waiting["request_id"]]
            call_id = request["tool_call_id"]
            assert call_id is not None and turn["tool_calls"][call_id]["name"] == "pick_colour"
            await session.answer(waiting["request_id"], payload="teal")
            state = await live.wait_for(_ended)
        turn = state["turns"][-1]
        assert turn["stop_reason"] == "end_turn"
        assert turn["tool_calls"][call_id]["status"] == "completed"
        assert turn["tool_calls"][call_id]["output"] == "teal"
        # The model's next step saw the client's result.
        said = [m["text"] for m in turn["messages"].values() if m["role"] == "assistant"]
        assert "The client tool `pick_colour` returned: teal" in said, said


async def test_errors_are_typed(server: Server) -> None:
    async with connect(server.url, server.token) as client:
        with pytest.raises(NotFoundError):
            await client.session("ses_01NOSUCHSESSION000000000").snapshot()
        # An id as a user may type it: one path segment, whatever it holds, so a 404.
        for odd in ("ses_\x1b[2J", "../../healthz", "..", "a b?c#d", "ses_/x"):
            with pytest.raises(NotFoundError):
                await client.session(odd).snapshot()
            with pytest.raises(NotFoundError):
                await client.artifact(odd)
        session = await client.create_session("errors")
        await session.send_message("go")
        async with session.subscribe() as live:
            state = await live.wait_for(_waiting)
        request_id = state["open_input_requests"][0]["request_id"]
        with pytest.raises(InvalidRequestError) as invalid:
            await session.answer(request_id, option_id="not_offered")
        assert invalid.value.status == 422
        with pytest.raises(ConflictError) as busy:
            await session.send_message("second", if_busy="reject")
        assert busy.value.code == "session_busy"
        assert [r.code for r in session.local.rolled_back] == ["session_busy"]
        await session.cancel()
        with pytest.raises(GoneError):
            await session.answer(request_id, option_id="allow_once")
        with pytest.raises(NotFoundError):
            await session.answer("req_01NOSUCHREQUEST000000000", option_id="allow_once")
    async with connect(server.url, "wrong-token") as client:
        with pytest.raises(UnauthorizedError):
            await client.list_sessions()


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_a_subscription_survives_kill9_and_restart(tmp_path: Path) -> None:
    server = Server(tmp_path, step_delay="0.05").start()
    try:
        async with connect(server.url, server.token, client_id="cli_watch") as client:
            session = await client.create_session("restart")
            async with session.subscribe() as live:
                await session.send_message("survive")
                state = await live.wait_for(_waiting)
                request_id = state["open_input_requests"][0]["request_id"]
                server.kill9()
                seen: list[str] = []
                async for event in live:
                    if isinstance(event, ConnectionEvent):
                        seen.append(event.status)
                        if event.status == "disconnected" and len(seen) == 1:
                            server.start()  # same port, same data directory
                        if event.status == "connected":
                            break
                assert seen[0] == "disconnected" and seen[-1] == "connected"
                # Another client answers after the restart; this one sees it live.
                async with connect(server.url, server.token, client_id="cli_other") as other:
                    await other.session(session.session_id).answer(
                        request_id, option_id="allow_once"
                    )
                final = await live.wait_for(_ended)
                assert live.reconnects >= 1
            _, snapshot = await session.snapshot()
        assert state_to_json(final) == state_to_json(snapshot)
        turn = final["turns"][0]
        assert turn["stop_reason"] == "end_turn"
        answered_by = turn["input_requests"][request_id]["answered_by"]
        assert answered_by is not None and answered_by["client_id"] == "cli_other"
        assert len(turn["input_requests"]) == 1
    finally:
        server.stop()
