"""Issue 12, bug 8 and "bad input everywhere": problem JSON or a clean close, never a 500,
a dropped connection or a traceback, and nothing already accepted is lost.

Against a real uvicorn on loopback, so a dropped connection shows as one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from opennua.store import ArtifactRecord

from ._harness import AUTH, Env, environment, serving

PROBLEM = "application/problem+json"


@pytest.fixture
async def env(tmp_path: Path) -> Any:
    async with environment(f"sqlite:///{tmp_path}/nua.db", tmp_path) as e:
        yield e


def _client(base: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"http://{base}", headers=AUTH, timeout=10)


def _json(body: str) -> dict[str, Any]:
    return {"content": body.encode(), "headers": {"content-type": "application/json"}}


def _problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    problem: dict[str, Any] = response.json()
    assert problem["code"] == code and problem["status"] == status
    return problem


async def _session(client: httpx.AsyncClient) -> str:
    response = await client.post("/v1/sessions", json={"title": "t"})
    assert response.status_code == 201, response.text
    sid: str = response.json()["session_id"]
    return sid


async def test_seq_cursors_are_bounded_and_ascii(env: Env) -> None:
    async with serving(env.app) as base, _client(base) as client:
        sid = await _session(client)
        for value in (b"\xb2", b"1" * 5000, b"9223372036854775808", b"-1", b"+1", b"1e3"):
            headers = {"Last-Event-ID": value}
            response = await client.get(f"/v1/sessions/{sid}/events", headers=headers)
            _problem(response, 422, "validation_error")
        for path in ("actions", "events"):
            response = await client.get(f"/v1/sessions/{sid}/{path}?after=9223372036854775808")
            _problem(response, 422, "validation_error")
        top = await client.get(f"/v1/sessions/{sid}/actions?after=9223372036854775807")
        assert top.status_code == 200 and top.json()["actions"] == []
        for query in ("limit=9223372036854775808", "limit=x", "cursor=" + "z" * 5000):
            _problem(await client.get(f"/v1/sessions?{query}"), 422, "validation_error")
        # A WebSocket cursor out of range is refused at the handshake, not with a 1011.
        url = f"ws://{base}/v1/sessions/{sid}/ws?after=9223372036854775808"
        with pytest.raises(InvalidStatus) as refused:
            async with connect(url, additional_headers=AUTH):
                pass
        assert refused.value.response.status_code == 403


async def test_lone_surrogates_are_refused_at_the_edge_naming_the_field(env: Env) -> None:
    async with serving(env.app) as base, _client(base) as client:
        metadata = await client.post("/v1/sessions", **_json('{"metadata": {"\\udc80": 1}}'))
        problem = _problem(metadata, 422, "validation_error")
        assert problem["errors"][0]["loc"] == ["body", "metadata", "\\udc80"]
        sid = await _session(client)  # the server still writes
        text = '{"content": [{"type": "text", "text": "Hello \\ud800 world"}]}'
        message = await client.post(f"/v1/sessions/{sid}/messages", **_json(text))
        problem = _problem(message, 422, "validation_error")
        assert problem["errors"][0]["loc"] == ["body", "content", 0, "text"]
        # Raw surrogate bytes (CESU-8) get the same answer as the escape.
        raw = b'{"title": "\xed\xb2\x80"}'
        titled = await client.post(
            "/v1/sessions", content=raw, headers={"content-type": "application/json"}
        )
        assert titled.status_code in (400, 422) and titled.headers["content-type"] == PROBLEM
        answer = await client.post(
            f"/v1/sessions/{sid}/input-requests/req_x/answer",
            **_json('{"payload": {"a": ["\\udfff"]}}'),
        )
        problem = _problem(answer, 422, "validation_error")
        assert problem["errors"][0]["loc"] == ["body", "payload", "a", 0]
        for bad in ('{"metadata": {"n": NaN}}', '{"metadata": {"n": Infinity}}'):
            _problem(await client.post("/v1/sessions", **_json(bad)), 422, "validation_error")
        deep = '{"metadata": {"a": ' + "[" * 200 + "]" * 200 + "}}"
        _problem(await client.post("/v1/sessions", **_json(deep)), 422, "validation_error")
        deeper = '{"metadata": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}"
        response = await client.post("/v1/sessions", **_json(deeper))
        assert response.status_code in (400, 422) and response.headers["content-type"] == PROBLEM
        # Nothing accepted was lost, and the session still takes messages.
        good = {"content": [{"type": "text", "text": "still here ✓"}]}
        assert (await client.post(f"/v1/sessions/{sid}/messages", json=good)).status_code == 202
        actions = (await client.get(f"/v1/sessions/{sid}/actions")).json()["actions"]
        assert [a["type"] for a in actions] == ["session.created", "turn.started"]
        listed = (await client.get("/v1/sessions")).json()["items"]
        assert len(listed) == 1


async def test_numbers_past_64_bits_and_control_characters_in_values_round_trip(
    env: Env,
) -> None:
    async with serving(env.app) as base, _client(base) as client:
        big = {"n": 2**63, "m": -(2**70), "f": 1e308}
        created = await client.post(
            "/v1/sessions", json={"title": "line\r\nbreak\x00", "metadata": big}
        )
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        listed = (await client.get("/v1/sessions")).json()["items"][0]
        assert listed["metadata"] == big and listed["title"] == "line\r\nbreak\x00"
        state = (await client.get(f"/v1/sessions/{sid}")).json()["state"]
        assert state["title"] == "line\r\nbreak\x00"
        payload = {"payload": {"n": 2**64}}
        answer = await client.post(f"/v1/sessions/{sid}/input-requests/req_x/answer", json=payload)
        _problem(answer, 404, "not_found")
        for path in ("turns/trn_x/retry", "cancel"):
            response = await client.post(f"/v1/sessions/{sid}/{path}", json={"turn_id": 2**63})
            _problem(response, 422, "validation_error")


async def test_wrong_types_and_shapes_are_422(env: Env) -> None:
    async with serving(env.app) as base, _client(base) as client:
        sid = await _session(client)
        for body in (
            "[]",
            '"x"',
            '{"title": 5}',
            '{"metadata": []}',
            '{"client_id": ""}',
            '{"title": "' + "x" * 201 + '"}',
        ):
            _problem(await client.post("/v1/sessions", **_json(body)), 422, "validation_error")
        for body in ('{"content": ""}', '{"content": [{"type": "text"}]}', '{"if_busy": 1}'):
            response = await client.post(f"/v1/sessions/{sid}/messages", **_json(body))
            _problem(response, 422, "validation_error")
        response = await client.post(
            f"/v1/sessions/{sid}/messages",
            content=b"\xff\xfe",
            headers={"content-type": "application/json"},
        )
        assert response.status_code in (400, 422) and response.headers["content-type"] == PROBLEM
        header = {"Idempotency-Key": "k" * 129}
        response = await client.post(f"/v1/sessions/{sid}/cancel", json={}, headers=header)
        _problem(response, 422, "validation_error")


async def _artifact(env: Env, sid: str, name: str, media_type: str) -> None:
    ref = await env.store.blobs.put(b"report body")
    await env.store.put_artifact(
        ArtifactRecord(
            artifact_id="art_1",
            session_id=sid,
            name=name,
            media_type=media_type,
            size=ref.size,
            sha256=ref.sha256,
            created_at=env.clock(),
        )
    )


async def test_an_artifact_with_a_non_ascii_name_downloads(env: Env) -> None:
    async with serving(env.app) as base, _client(base) as client:
        sid = await _session(client)
        await _artifact(env, sid, "报告.md", "text/markdown")
        content = await client.get("/v1/artifacts/art_1/content")
        assert content.status_code == 200 and content.content == b"report body"
        disposition = content.headers["content-disposition"]
        assert disposition == (
            "attachment; filename=\"__.md\"; filename*=UTF-8''%E6%8A%A5%E5%91%8A.md"
        )
        assert content.headers["content-type"].startswith("text/markdown")
        meta = await client.get("/v1/artifacts/art_1")
        assert meta.status_code == 200 and meta.json()["name"] == "报告.md"


@pytest.mark.parametrize(
    ("name", "media_type"),
    [
        ("evil\r\nSet-Cookie: x=1.txt", "text/plain"),
        ("notes.txt", "text/plain\r\nX-Injected: 1"),
        ('quote"back\\slash\x00\x7f.txt', "text/html; charset=\x01"),
    ],
)
async def test_control_characters_never_reach_a_header(
    env: Env, name: str, media_type: str
) -> None:
    async with serving(env.app) as base, _client(base) as client:
        sid = await _session(client)
        await _artifact(env, sid, name, media_type)
        content = await client.get("/v1/artifacts/art_1/content")
        assert content.status_code == 200 and content.content == b"report body"
        for header, value in content.headers.items():
            assert not any(ord(c) < 0x20 or ord(c) == 0x7F for c in value), (header, value)
        assert "x-injected" not in content.headers and "set-cookie" not in content.headers
        if "\r" in media_type or "\x01" in media_type:
            assert content.headers["content-type"] == "application/octet-stream"
        else:
            assert content.headers["content-type"].startswith(media_type)
        assert content.headers["content-disposition"].startswith('attachment; filename="')


async def test_websocket_frames_that_are_not_intents_close_cleanly(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    await _not_intents(env, caplog.handler)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not errors, [r.getMessage() for r in errors]


async def _not_intents(env: Env, handler: logging.Handler) -> None:
    async with serving(env.app) as base, _uvicorn_logs_to(handler), _client(base) as client:
        sid = await _session(client)
        url = f"ws://{base}/v1/sessions/{sid}/ws?after=1&client_id=cli_ws"
        # Nested 10,000 deep: 1007 with a reason, no traceback.
        for frame in ("[" * 10_000 + "]" * 10_000, '{"type": "send_message", ', b"\xff\xfe"):
            async with connect(url, additional_headers=AUTH) as ws:
                await ws.send(frame)
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        await asyncio.wait_for(ws.recv(), 5)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1007
                assert closed.value.rcvd.reason
        # A lone surrogate in an intent: a validation error naming the field, the socket
        # stays open and the next intent is accepted.
        async with connect(url, additional_headers=AUTH) as ws:
            await ws.send(
                '{"type": "send_message", "intent_id": "int_1",'
                ' "content": [{"type": "text", "text": "\\udc80"}]}'
            )
            while (reply := json.loads(await asyncio.wait_for(ws.recv(), 5)))["type"] != "error":
                pass
            assert reply["code"] == "validation_error"
            assert reply["detail"][0]["loc"] == ["content", 0, "text"]
            await ws.send(json.dumps({"type": "update_session", "intent_id": "i", "title": "ok"}))
            while (reply := json.loads(await asyncio.wait_for(ws.recv(), 5)))["type"] != "result":
                pass
            assert reply["result"]["type"] == "accepted"
        # Frames over the body limit (1 MiB) are refused before they are read whole.
        async with connect(url, additional_headers=AUTH, max_size=None) as ws:
            await ws.send("x" * (2 << 20))
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(ws.recv(), 5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


@contextlib.asynccontextmanager
async def _uvicorn_logs_to(handler: logging.Handler) -> AsyncIterator[None]:
    """uvicorn's error log does not propagate, and configuring a server resets it."""
    log = logging.getLogger("uvicorn.error")
    log.addHandler(handler)
    try:
        yield
    finally:
        log.removeHandler(handler)
