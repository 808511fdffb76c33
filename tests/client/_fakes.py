"""A scripted stand-in for the server's HTTP surface (httpx.MockTransport), for the client
logic that a real server cannot be made to exercise on demand: resync frames, gaps, a
connection dropped mid-stream, a response lost after the request was performed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from opennua.protocol import action_from_dict, replay, state_to_json

SID = "ses_01TEST"


def act(seq: int, type_: str, data: dict[str, Any], **envelope: Any) -> dict[str, Any]:
    return {
        "v": 1,
        "session_id": SID,
        "seq": seq,
        "id": f"act_{seq:04d}",
        "type": type_,
        "ts": "2026-01-01T00:00:00.000Z",
        "turn_id": None,
        "run_id": None,
        "client_id": None,
        "intent_id": None,
        "data": data,
    } | envelope


def titles(count: int, start: int = 1) -> list[dict[str, Any]]:
    """A log: session.created, then session.updated actions up to seq start+count-1."""
    log = [act(1, "session.created", {"title": "t0"})] if start == 1 else []
    first = 2 if start == 1 else start
    log += [act(seq, "session.updated", {"title": f"t{seq}"}) for seq in range(first, count + 1)]
    return log


def turn_started(seq: int, turn_id: str, intent_id: str | None) -> dict[str, Any]:
    return act(
        seq,
        "turn.started",
        {
            "execution_id": "exe_1",
            "trigger": {"kind": "message", "principal_id": "prn_1", "client_id": "cli_1"},
            "input": [{"type": "text", "text": "hi"}],
            "message_id": "msg_1",
            "trace_id": "0" * 32,
        },
        turn_id=turn_id,
        intent_id=intent_id,
        client_id="cli_1",
    )


def sse(action: dict[str, Any]) -> bytes:
    return f"id: {action['seq']}\nevent: action\ndata: {json.dumps(action)}\n\n".encode()


@dataclass
class FakeServer:
    """`log` is the session's actions; `streams` scripts each successive SSE connection as
    a list of seqs to send, "resync", "drop" (the connection breaks) or "hold" (stay open)."""

    log: list[dict[str, Any]]
    streams: list[list[int | str]] = field(default_factory=list)
    requests: list[httpx.Request] = field(default_factory=list)
    event_afters: list[int] = field(default_factory=list)
    #: POST path -> responses to give in order (the last one repeats); an exception is raised
    #: after the request was "performed" (its effect recorded), like a lost response.
    posts: dict[str, list[Any]] = field(default_factory=dict)
    performed: list[dict[str, Any]] = field(default_factory=list)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if request.method == "GET" and path == f"/v1/sessions/{SID}":
            state = replay(action_from_dict(a) for a in self.log)
            return httpx.Response(
                200, json={"seq": state["seq"], "state": json.loads(state_to_json(state))}
            )
        if request.method == "GET" and path == f"/v1/sessions/{SID}/actions":
            after = int(request.url.params.get("after", 0))
            limit = int(request.url.params.get("limit", 100))
            page = [a for a in self.log if a["seq"] > after][:limit]
            return httpx.Response(
                200,
                json={
                    "actions": page,
                    "next_after": page[-1]["seq"] if page else after,
                    "more": len(page) == limit,
                },
            )
        if request.method == "GET" and path == f"/v1/sessions/{SID}/events":
            self.event_afters.append(int(request.url.params.get("after", 0)))
            script: list[int | str] = self.streams.pop(0) if self.streams else ["hold"]
            return httpx.Response(200, content=self._stream(script))
        if request.method == "POST" and path in self.posts:
            self.performed.append(
                {"key": request.headers.get("Idempotency-Key"), "body": json.loads(request.content)}
            )
            answers = self.posts[path]
            answer = answers.pop(0) if len(answers) > 1 else answers[0]
            if isinstance(answer, Exception):
                raise answer
            return answer  # type: ignore[no-any-return]
        return httpx.Response(
            404, json={"code": "not_found", "detail": f"no route {path}", "status": 404}
        )

    async def _stream(self, script: list[int | str]) -> AsyncIterator[bytes]:
        by_seq = {a["seq"]: a for a in self.log}
        yield b": connected\n\n"
        for step in script:
            if step == "resync":
                yield b'event: resync\ndata: {"seq": %d}\n\n' % len(self.log)
                return
            if step == "drop":
                raise httpx.ReadError("connection reset by peer")
            if step == "hold":
                import asyncio

                await asyncio.Event().wait()
            assert isinstance(step, int)
            yield sse(by_seq[step])
