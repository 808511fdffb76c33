"""Live delivery: Server-Sent Events and the WebSocket (DESIGN.md §5, §7).

Both read from one Hub subscription, so a slow connection costs at most its bounded
queue; it then gets `resync` and must fetch a snapshot. Heartbeats keep proxies from
closing idle connections and let clients notice a dead link.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from pydantic import ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from opennua.host import Hub, SessionHost
from opennua.protocol import (
    AnswerInput,
    Cancel,
    IntentResult,
    RetryTurn,
    SendMessage,
    UpdateSession,
)
from opennua.protocol.intents import INTENT_ADAPTER

HEARTBEAT_SECONDS = 15.0
SEND_TIMEOUT_SECONDS = 10.0
_log = logging.getLogger(__name__)
RESYNC_CLOSE_CODE = 4000


async def sse_stream(
    hub: Hub, session_id: str, after: int, heartbeat: float = HEARTBEAT_SECONDS
) -> AsyncIterator[str]:
    yield ": connected\n\n"
    async with hub.subscribe(session_id, after) as subscription:
        async for batch in subscription.batches(heartbeat):
            if not batch:
                yield ": heartbeat\n\n"
                continue
            # A burst goes out as one chunk: SSE frames its events itself.
            chunk = []
            for frame in batch:
                if frame.kind == "resync":
                    chunk.append(f"event: resync\ndata: {json.dumps({'seq': frame.seq})}\n\n")
                else:
                    chunk.append(f"id: {frame.seq}\nevent: action\ndata: {frame.json}\n\n")
            yield "".join(chunk)
            if batch[-1].kind == "resync":
                return


async def websocket_session(
    websocket: WebSocket,
    host: SessionHost,
    hub: Hub,
    session_id: str,
    after: int,
    client_id: str | None,
    heartbeat: float = HEARTBEAT_SECONDS,
    on_intent: Any = None,
    max_message: int = 1 << 20,
) -> None:
    """Actions out, intents in, on one socket; ends with close code 4000 after `resync`."""
    await websocket.accept()
    send_lock = asyncio.Lock()

    async def send(text: str) -> None:
        # A peer that stops reading must not pin its subscription (and the session's
        # ring) forever: a send that cannot complete in time ends the connection.
        async with send_lock, asyncio.timeout(SEND_TIMEOUT_SECONDS):
            await websocket.send_text(text)

    async def pump_out() -> None:
        async with hub.subscribe(session_id, after) as subscription:
            async for batch in subscription.batches(heartbeat):
                if not batch:
                    await send('{"type":"heartbeat"}')
                    continue
                # Whatever queued up while the last message was written goes out as one
                # message: a slow link gets fewer, larger messages instead of falling behind.
                actions = [frame.json for frame in batch if frame.kind == "action"]
                if actions:
                    await send('{"type":"actions","actions":[' + ",".join(actions) + "]}")
                if batch[-1].kind == "resync":
                    await send(json.dumps({"type": "resync", "seq": batch[-1].seq}))
                    return

    async def pump_in() -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            raw = message.get("text")
            if raw is None:
                raw = (message.get("bytes") or b"").decode("utf-8", "replace")
            if len(raw) > max_message:
                reply: dict[str, Any] = {
                    "type": "error",
                    "code": "payload_too_large",
                    "detail": f"intents are limited to {max_message} bytes",
                }
            else:
                reply = await _handle_intent(host, session_id, raw, client_id, on_intent)
            await send(json.dumps(reply))

    out = asyncio.ensure_future(pump_out())
    inbound = asyncio.ensure_future(pump_in())
    try:
        await asyncio.wait({out, inbound}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (out, inbound):
            task.cancel()
        for task in (out, inbound):
            with contextlib.suppress(BaseException):
                await task
    failed = [
        t.exception() for t in (out, inbound) if t.done() and not t.cancelled() and t.exception()
    ]
    errors = [e for e in failed if not isinstance(e, WebSocketDisconnect | OSError)]
    if out.done() and not out.cancelled() and out.exception() is None:
        code, reason = RESYNC_CLOSE_CODE, "resync"
    elif errors:
        _log.error("websocket for %s failed", session_id, exc_info=errors[0])
        code, reason = 1011, "internal error"
    else:
        return  # the client went away
    with contextlib.suppress(Exception):
        await websocket.close(code, reason)


async def _handle_intent(
    host: SessionHost, session_id: str, raw: str, client_id: str | None, on_intent: Any
) -> dict[str, Any]:
    try:
        data = json.loads(raw)
        if isinstance(data, dict) and client_id is not None:
            data.setdefault("client_id", client_id)
        intent = INTENT_ADAPTER.validate_python(data)
    except (ValueError, ValidationError) as exc:
        errors = exc.errors(include_url=False) if isinstance(exc, ValidationError) else str(exc)
        return {
            "type": "error",
            "code": "validation_error",
            "detail": json.loads(json.dumps(errors, default=str)),
        }
    result = await dispatch(host, session_id, intent)
    if on_intent is not None:
        on_intent(intent.type, result.type)
    return {"type": "result", "result": result.model_dump(mode="json")}


async def dispatch(
    host: SessionHost,
    session_id: str,
    intent: SendMessage | Cancel | AnswerInput | RetryTurn | UpdateSession,
) -> IntentResult:
    if isinstance(intent, SendMessage):
        return await host.send_message(session_id, intent)
    if isinstance(intent, Cancel):
        return await host.cancel(session_id, intent)
    if isinstance(intent, AnswerInput):
        return await host.answer_input(session_id, intent)
    if isinstance(intent, RetryTurn):
        return await host.retry_turn(session_id, intent)
    return await host.update_session(session_id, intent)
