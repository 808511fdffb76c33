"""SSE and WebSocket against a real uvicorn on loopback (SQLite; the logic is backend-free)."""

from __future__ import annotations

import asyncio
import json
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.typing import Origin

from opennua.protocol import action_from_dict, replay, state_to_json
from opennua.server._gzip import accepts_gzip
from tests._support.polling import until

from ._harness import AUTH, TOKEN, Env, environment, serving


@pytest.fixture
async def small_env(tmp_path: Path) -> Any:
    # Small bounds so a slow subscriber overflows quickly.
    async with environment(
        f"sqlite:///{tmp_path}/nua.db", tmp_path, max_actions=50, max_bytes=64 * 1024
    ) as e:
        yield e


async def _sse_events(response: httpx.Response, count: int) -> list[dict[str, str]]:
    events: list[dict[str, str]] = []
    current: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "event" in current:
                events.append(current)
                if len(events) == count:
                    return events
            current = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            current[name] = value
    return events


def _client(base: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"http://{base}", headers=AUTH, timeout=10)


async def _setup(client: httpx.AsyncClient) -> str:
    sid: str = (await client.post("/v1/sessions", json={"title": "s"})).json()["session_id"]
    for text in ("one", "two", "three", "four"):
        body = {"content": [{"type": "text", "text": text}]}
        assert (await client.post(f"/v1/sessions/{sid}/messages", json=body)).status_code == 202
    return sid  # 5 actions: session.created, then a turn.started each


async def test_sse_streams_and_resumes_from_last_event_id(env: Env) -> None:
    async with serving(env.app) as base, _client(base) as client:
        sid = await _setup(client)
        async with client.stream("GET", f"/v1/sessions/{sid}/events?after=0") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            events = await asyncio.wait_for(_sse_events(response, 5), 10)
        assert [e["id"] for e in events] == ["1", "2", "3", "4", "5"]
        assert all(e["event"] == "action" for e in events)
        assert json.loads(events[1]["data"])["type"] == "turn.started"
        resume = {"Last-Event-ID": "3"}
        async with client.stream("GET", f"/v1/sessions/{sid}/events", headers=resume) as r:
            first = await asyncio.wait_for(_sse_events(r, 2), 10)
        assert [e["id"] for e in first] == ["4", "5"]
        # Live: an action appended after subscribing arrives too.
        async with client.stream("GET", f"/v1/sessions/{sid}/events?after=5") as r:
            body = {"content": [{"type": "text", "text": "five"}]}
            await client.post(f"/v1/sessions/{sid}/messages", json=body)
            live = await asyncio.wait_for(_sse_events(r, 1), 10)
        assert live[0]["id"] == "6"
        missing = await client.get("/v1/sessions/ses_missing/events")
        assert missing.status_code == 404


async def test_websocket_actions_out_intents_in(env: Env) -> None:
    async with serving(env.app) as base, _client(base) as client:
        sid = await _setup(client)
        url = f"ws://{base}/v1/sessions/{sid}/ws?after=3&client_id=cli_ws"
        async with connect(url, additional_headers=AUTH) as ws:
            seqs: list[int] = []
            while len(seqs) < 2:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                if frame["type"] == "actions":
                    seqs.extend(action["seq"] for action in frame["actions"])
            assert seqs == [4, 5]
            intent = {
                "type": "send_message",
                "intent_id": "int_ws_1",
                "content": [{"type": "text", "text": "over ws"}],
            }
            await ws.send(json.dumps(intent))
            result, actions = None, []
            while result is None or not actions:  # its turn.started
                frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                if frame["type"] == "result":
                    result = frame["result"]
                elif frame["type"] == "actions":
                    actions.extend(frame["actions"])
            assert result["type"] == "accepted" and result["intent_id"] == "int_ws_1"
            assert actions[0]["intent_id"] == "int_ws_1"
            assert actions[0]["client_id"] == "cli_ws"
            await ws.send(json.dumps({"type": "send_message"}))
            while (frame := json.loads(await ws.recv()))["type"] != "error":
                pass
            assert frame["code"] == "validation_error"
        with pytest.raises(Exception):  # noqa: B017 - the handshake is refused
            async with connect(f"ws://{base}/v1/sessions/{sid}/ws"):
                pass


async def test_slow_websocket_subscriber_gets_resync_and_stays_bounded(small_env: Env) -> None:
    env = small_env
    async with serving(env.app) as base, _client(base) as client:
        sid = await _setup(client)
        url = f"ws://{base}/v1/sessions/{sid}/ws?after=0"
        async with connect(url, additional_headers=AUTH, max_queue=1, ping_interval=None) as ws:
            await asyncio.sleep(0.2)
            # The "agent" appends 4,000 actions of ~2 KiB while the client reads nothing.
            filler = "x" * 2048
            loop = asyncio.get_running_loop()
            started = loop.time()
            for batch in range(40):
                actions = [
                    {
                        "v": 1,
                        "session_id": sid,
                        "id": f"act_fill_{batch}_{i}",
                        "type": "test.filler",
                        "ts": "2027-01-15T08:00:00.000Z",
                        "data": {"blob": filler},
                    }
                    for i in range(100)
                ]
                await env.store.append(sid, actions)
                await env.hub.notify(sid)
            assert loop.time() - started < 30  # the writer never waited on the reader
            assert env.hub.stats.resyncs >= 1
            assert env.hub.subscriber_count == 0  # the laggard was dropped, not buffered
            frames: list[dict[str, Any]] = []
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    frames.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4000
        assert frames[-1]["type"] == "resync"
        # Converge: snapshot equals a replay of the whole log.
        snap = (await client.get(f"/v1/sessions/{sid}")).json()
        history: list[dict[str, Any]] = []
        while True:
            page = (
                await client.get(
                    f"/v1/sessions/{sid}/actions",
                    params={"after": len(history), "limit": 1000},
                )
            ).json()
            history += page["actions"]
            if not page["more"]:
                break
        assert snap["seq"] == len(history) == 4005
        replayed = replay(action_from_dict(a) for a in history)
        assert state_to_json(snap["state"]) == state_to_json(replayed)


async def test_sse_heartbeat_and_resync(small_env: Env) -> None:
    env = small_env
    async with serving(env.app) as base, _client(base) as client:
        sid = await _setup(client)
        async with client.stream("GET", f"/v1/sessions/{sid}/events?after=5") as response:
            lines = response.aiter_lines()
            seen: list[str] = []
            while ": heartbeat" not in seen:
                seen.append(await asyncio.wait_for(anext(lines), 5))
            # Overflow this subscriber (50 actions max) while it is not reading.
            actions = [
                {
                    "v": 1,
                    "session_id": sid,
                    "id": f"act_sse_{i}",
                    "type": "test.filler",
                    "ts": "2027-01-15T08:00:00.000Z",
                    "data": {},
                }
                for i in range(200)
            ]
            await env.store.append(sid, actions)
            await env.hub.notify(sid)
            rest = [line async for line in lines]
        # The stream ended right after the resync event (no actions after it).
        tail = rest[rest.index("event: resync") :]
        assert tail[1].startswith("data: ") and not any(x.startswith("id: ") for x in tail)


async def _raw_until(raw: Any, inflate: Any, text: list[str], needle: str, times: int) -> None:
    """Read raw (still compressed) chunks until the text inflated so far holds `needle`
    `times` times: what arrived must decode without the bytes still to come."""
    while "".join(text).count(needle) < times:
        chunk = await asyncio.wait_for(anext(raw), 5)
        text.append(inflate(chunk).decode())


async def test_sse_is_gzipped_when_asked_and_every_batch_decodes_on_arrival(
    small_env: Env,
) -> None:
    env = small_env
    async with serving(env.app) as base, _client(base) as client:
        sid = await _setup(client)
        gzipped = {"Accept-Encoding": "br;q=1, gzip;q=0.5"}
        async with client.stream("GET", f"/v1/sessions/{sid}/events", headers=gzipped) as r:
            assert r.headers["content-encoding"] == "gzip"
            assert r.headers["vary"] == "Accept-Encoding"
            raw = r.aiter_raw()
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            text: list[str] = []
            # The five actions there are, while the stream stays open: flushed, not held
            # in the compressor until more comes.
            await _raw_until(raw, inflater.decompress, text, "event: action", 5)
            assert not inflater.eof
            await client.post(
                f"/v1/sessions/{sid}/messages", json={"content": [{"type": "text", "text": "6"}]}
            )
            await _raw_until(raw, inflater.decompress, text, "event: action", 6)
            assert "id: 6\n" in "".join(text)
            # Overflow the subscriber: the stream ends after `resync`, its gzip member whole.
            filler = [
                {"v": 1, "session_id": sid, "id": f"act_gz_{i}", "type": "test.filler",
                 "ts": "2027-01-15T08:00:00.000Z", "data": {}}
                for i in range(200)
            ]  # fmt: skip
            await env.store.append(sid, filler)
            await env.hub.notify(sid)
            text.extend([inflater.decompress(chunk).decode() async for chunk in raw])
        assert inflater.eof and not inflater.unused_data
        assert "event: resync" in "".join(text)
        for refused in ("identity", "gzip;q=0, *", "*;q=0", "deflate"):
            plain = {"Accept-Encoding": refused}
            async with client.stream("GET", f"/v1/sessions/{sid}/events", headers=plain) as r:
                assert "content-encoding" not in r.headers, refused
                first = await asyncio.wait_for(anext(r.aiter_raw()), 5)
            assert first.startswith(b": connected"), refused


@pytest.mark.parametrize(
    ("header", "gzip"),
    [
        ("gzip", True),
        ("GZIP", True),
        ("x-gzip", True),
        ("gzip, deflate, br, zstd", True),
        ("deflate;q=1, gzip;q=0.001", True),
        ("*", True),
        ("br, *;q=0.1", True),
        ("", False),
        ("identity", False),
        ("gzip;q=0", False),
        ("gzip;q=0.000", False),
        ("gzip;q=0, *", False),
        ("*;q=0", False),
        ("gzip;q=nonsense", False),
    ],
)
def test_accept_encoding_is_read_as_rfc_9110_says(header: str, gzip: bool) -> None:
    assert accepts_gzip([(b"accept-encoding", header.encode())]) is gzip


async def test_websocket_cookie_needs_own_origin(env: Env) -> None:
    async with serving(env.app) as base, _client(base) as client:
        sid = await _setup(client)
        login = await client.get("/login", params={"token": TOKEN})
        # The cookie's name carries the port: two servers on one machine keep theirs apart.
        name = f"nua_session_{base.rsplit(':', 1)[1]}"
        cookie = f"{name}={login.cookies[name]}"
        url = f"ws://{base}/v1/sessions/{sid}/ws?after=5&client_id=cli_browser"
        with pytest.raises(InvalidStatus) as refused:
            async with connect(
                url, additional_headers={"Cookie": cookie}, origin=Origin("http://evil")
            ):
                pass
        assert refused.value.response.status_code == 403
        own = f"http://{base}"
        async with connect(url, additional_headers={"Cookie": cookie}, origin=Origin(own)) as ws:
            await ws.send(json.dumps({"type": "update_session", "intent_id": "i", "title": "x"}))
            while (frame := json.loads(await asyncio.wait_for(ws.recv(), 10)))["type"] != "result":
                pass
            assert frame["result"]["type"] == "accepted"


async def test_disconnects_release_subscribers_and_snapshots_keep_up(env: Env) -> None:
    async with serving(env.app) as base, _client(base) as client:
        sid = await _setup(client)
        async with client.stream("GET", f"/v1/sessions/{sid}/events?after=0") as response:
            await asyncio.wait_for(_sse_events(response, 1), 10)
            assert env.hub.subscriber_count == 1
        await until(lambda: env.hub.subscriber_count == 0)
        async with connect(f"ws://{base}/v1/sessions/{sid}/ws", additional_headers=AUTH) as ws:
            await asyncio.wait_for(ws.recv(), 10)
            assert env.hub.subscriber_count == 1
        await until(lambda: env.hub.subscriber_count == 0)
        # A turn ends (as a supervisor would record it): the Host stores a snapshot by
        # itself, without any client asking for one.
        turn_id = (await env.host.history(sid, after=1, limit=1))[0]["turn_id"]
        ended = {
            "v": 1,
            "session_id": sid,
            "id": "act_ended_1",
            "type": "turn.ended",
            "ts": "2027-01-15T08:00:01.000Z",
            "turn_id": turn_id,
            "data": {"stop_reason": "end_turn"},
        }
        (seq,) = await env.store.append(sid, [ended])
        for _ in range(250):
            snapshot = await env.store.get_snapshot(sid)
            if snapshot is not None and snapshot.seq == seq:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("no snapshot at turn end")
