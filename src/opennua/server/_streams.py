"""Live delivery: Server-Sent Events and the WebSocket (docs/server.md, "Live streams").

Both read from one Hub subscription, so a slow connection costs at most its bounded
queue; it then gets `resync` and must fetch a snapshot. Both give up on a peer that stops
reading: a write that cannot complete within the send timeout ends the connection, so a
stalled reader pins neither its subscription nor what was queued for it. Heartbeats keep
proxies from closing idle connections and let clients notice a dead link. A stream is a
request like any other: when its caller may no longer read the session (a revocation,
`_revocations`), it ends at once, saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from opennua.host import Actor, Frame, Hub, SessionHost, parse_traceparent, trace_parent
from opennua.protocol import IntentResult, Rejected
from opennua.protocol.intents import INTENT_ADAPTER

from ._edge import json_problems
from ._gzip import gzip_send
from ._revocations import Watched

HEARTBEAT_SECONDS = 15.0
SEND_TIMEOUT_SECONDS = 10.0
#: SSE writes go out in pieces of this size, so what waits in the transport's buffer for
#: a slow reader stays near its high-water mark instead of a whole 1 MiB batch.
SSE_PIECE = 64 * 1024
RESYNC_CLOSE_CODE = 4000
NOT_FOUND_CLOSE_CODE = 4404
INVALID_CLOSE_CODE = 1007
#: The ASGI scope extension through which `nua serve`'s HTTP protocol lets an app drop a
#: connection at once (see `_serve.py`); without it, a stalled SSE response just ends.
ABORT_EXTENSION = "opennua.abort"
_log = logging.getLogger(__name__)

OnIntent = Callable[[str, str], None]


class SSEResponse(Response):
    """`text/event-stream` of one session from `after`. Not a StreamingResponse: every
    write here has the WebSocket's send timeout, and a stalled peer is dropped."""

    def __init__(
        self,
        hub: Hub,
        session_id: str,
        after: int,
        *,
        heartbeat: float = HEARTBEAT_SECONDS,
        send_timeout: float = SEND_TIMEOUT_SECONDS,
        watch: contextlib.AbstractAsyncContextManager[Watched] | None = None,
    ) -> None:
        """`watch`: registers the stream's caller for as long as it streams
        (`Streams.watching`), so that a revocation ends it."""
        self._hub = hub
        self._session_id = session_id
        self._after = after
        self._heartbeat = heartbeat
        self._send_timeout = send_timeout
        self._watch = watch
        self.status_code = 200
        self.background = None
        self.media_type = "text/event-stream"
        # No body attribute yet, so no Content-Length: the stream ends when it ends.
        self.init_headers({"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        disconnected = asyncio.Event()

        async def listen() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            disconnected.set()

        listener = asyncio.ensure_future(listen())
        async with self._watch if self._watch is not None else contextlib.nullcontext() as watched:
            pump = asyncio.ensure_future(self._pump(gzip_send(scope, send), watched))
            try:
                await asyncio.wait({listener, pump}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                pump.cancel()
                with contextlib.suppress(BaseException):
                    await pump
        stalled = pump.done() and not pump.cancelled() and isinstance(pump.exception(), _Stalled)
        if stalled and not disconnected.is_set():
            abort = scope.get("extensions", {}).get(ABORT_EXTENSION, {}).get("abort")
            if abort is not None:
                abort()
                # The server sees the connection lost on its next loop iteration; wait for
                # it so the response does not count as "returned without completing".
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(listener), 1.0)
        listener.cancel()
        with contextlib.suppress(BaseException):
            await listener
        if pump.done() and not pump.cancelled():
            error = pump.exception()
            if error is not None and not isinstance(error, _Stalled | OSError):
                raise error

    async def _pump(self, send: Send, watched: Watched | None) -> None:
        async def write(text: str, more: bool = True) -> None:
            data = text.encode()
            for start in range(0, max(len(data), 1), SSE_PIECE):
                try:
                    async with asyncio.timeout(self._send_timeout):
                        await send(
                            {
                                "type": "http.response.body",
                                "body": data[start : start + SSE_PIECE],
                                "more_body": more or start + SSE_PIECE < len(data),
                            }
                        )
                except TimeoutError:
                    raise _Stalled from None

        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await write(": connected\n\n")
        async with self._hub.subscribe(self._session_id, self._after) as subscription:
            if watched is not None:
                watched.attach(subscription)
            async for batch in subscription.batches(self._heartbeat):
                if not batch:
                    await write(": heartbeat\n\n")
                    continue
                # A burst goes out as one write: SSE frames its events itself.
                await write("".join(_sse_event(frame) for frame in batch))
                if batch[-1].kind == "resync":
                    break
        if watched is not None and watched.denied is not None:
            # The caller may no longer read this session: say why, and end the response.
            why = {"code": watched.denied.code, "detail": watched.denied.detail}
            await write(f"event: revoked\ndata: {json.dumps(why)}\n\n", more=False)
            return
        await write("", more=False)


async def until_first(*tasks: asyncio.Future[Any]) -> None:
    """Wait until one of `tasks` ends (a stream's two directions: the peer went, or the
    pump did), then cancel the others and wait for every one of them to end."""
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task


class _Stalled(Exception):
    """The peer stopped reading: a write did not complete within the send timeout."""


def _sse_event(frame: Frame) -> str:
    if frame.kind == "resync":
        return f"event: resync\ndata: {json.dumps({'seq': frame.seq})}\n\n"
    return f"id: {frame.seq}\nevent: action\ndata: {frame.json}\n\n"


async def websocket_session(
    websocket: WebSocket,
    host: SessionHost,
    hub: Hub,
    session_id: str,
    after: int,
    client_id: str | None,
    *,
    heartbeat: float = HEARTBEAT_SECONDS,
    send_timeout: float = SEND_TIMEOUT_SECONDS,
    on_intent: OnIntent | None = None,
    actor: Actor | None = None,
    watched: Watched | None = None,
) -> None:
    """Actions out, intents in, on one accepted socket; ends with close code 4000 after
    `resync`, 1007 after a frame that is not JSON (or too deep to be an intent), and
    4401/4403 when `watched`'s caller may no longer read the session. Intents act as
    `actor`; None refuses them (a caller who may only read, or no longer act)."""
    send_lock = asyncio.Lock()

    async def send(text: str) -> None:
        # A peer that stops reading must not pin its subscription (and the session's
        # ring) forever: a send that cannot complete in time ends the connection.
        async with send_lock, asyncio.timeout(send_timeout):
            await websocket.send_text(text)

    async def pump_out() -> None:
        async with hub.subscribe(session_id, after) as subscription:
            if watched is not None:
                watched.attach(subscription)
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

    async def pump_in() -> str:
        """Returns the reason to close with 1007, or "" when the peer left."""
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return ""
            raw = message.get("text")
            if raw is None:
                try:
                    raw = (message.get("bytes") or b"").decode("utf-8")
                except UnicodeDecodeError:
                    return "frames must be UTF-8 JSON"
            try:
                data = json.loads(raw)
            except RecursionError:
                return "the JSON is nested too deeply"
            except ValueError:
                return "frames must be JSON intents"
            acting = actor if watched is None or watched.may_act else None
            reply = await _handle_intent(host, session_id, data, client_id, on_intent, acting)
            if reply is None:
                return "the JSON is nested too deeply"
            await send(json.dumps(reply))

    out = asyncio.ensure_future(pump_out())
    inbound = asyncio.ensure_future(pump_in())
    await until_first(out, inbound)
    failed = [
        t.exception() for t in (out, inbound) if t.done() and not t.cancelled() and t.exception()
    ]
    # TimeoutError (a stalled peer) is an OSError: the peer is gone as far as we care.
    errors = [e for e in failed if not isinstance(e, WebSocketDisconnect | OSError)]
    if errors:
        _log.error("websocket for %s failed", session_id, exc_info=errors[0])
        code, reason = 1011, "internal error"
    elif watched is not None and watched.denied is not None:
        code, reason = watched.close_code, watched.denied.code
    elif out.done() and not out.cancelled() and out.exception() is None:
        code, reason = RESYNC_CLOSE_CODE, "resync"
    elif inbound.done() and not inbound.cancelled() and inbound.exception() is None:
        reason = inbound.result()
        if not reason:
            return  # the client went away
        code = INVALID_CLOSE_CODE
    else:
        return  # the client went away
    with contextlib.suppress(Exception):
        await websocket.close(code, reason)


async def _handle_intent(
    host: SessionHost,
    session_id: str,
    data: Any,
    client_id: str | None,
    on_intent: Any,
    actor: Actor | None,
) -> dict[str, Any] | None:
    """The reply to one decoded frame; None when it is too deep to be an intent."""
    problems = json_problems(data)
    if any(p["type"] == "too_deep" for p in problems):
        return None
    if problems:
        return {"type": "error", "code": "validation_error", "detail": problems}
    # A frame's `traceparent` is to the frame what the header is to a POST: the turn its
    # intent starts joins that trace. It is not part of the intent; an invalid one is
    # ignored (W3C Trace Context).
    carried = data.pop("traceparent", None) if isinstance(data, dict) else None
    parsed = parse_traceparent(carried) if isinstance(carried, str) else None
    if isinstance(data, dict) and client_id is not None:
        data.setdefault("client_id", client_id)
    try:
        intent = INTENT_ADAPTER.validate_python(data)
    except ValidationError as exc:
        return {
            "type": "error",
            "code": "validation_error",
            "detail": json.loads(json.dumps(exc.errors(include_url=False), default=str)),
        }
    if actor is None:  # the caller may read the session but not act on it
        result: IntentResult = Rejected(
            intent_id=intent.intent_id,
            code="insufficient_role",
            message="your role in this workspace may only read",
        )
    else:
        token = trace_parent.set("00-{}-{}-{}".format(*parsed) if parsed else None)
        try:
            result = await host.submit(session_id, intent, actor=actor)
        finally:
            trace_parent.reset(token)
    if on_intent is not None:
        on_intent(intent.type, result.type)
    return {"type": "result", "result": result.model_dump(mode="json")}
