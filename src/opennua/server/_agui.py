"""AG-UI: `POST /v1/agui/{deployment}` and `POST /v1/agui/sessions/{session_id}` take a
`RunAgentInput` and answer with the AG-UI event stream (docs/protocols.md, "AG-UI").

The route is a client of the Host like the others: the input becomes our intents through
`SessionHost.submit`, and the stream is `opennua.protocols.agui.RunStream` over the
session's folded state and the Hub's tail of its log. Whatever is refused before the
stream starts (bad input, an unknown deployment or thread, a losing answer) is problem
JSON; once it started, the run ends with `RUN_FINISHED` or `RUN_ERROR`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Annotated, Any

from ag_ui.core import BaseEvent, RunAgentInput, RunErrorEvent
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Depends, Path
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from opennua.host import Hub
from opennua.protocol import CreateSession, IntentResult, SendMessage
from opennua.protocol.intents import NAME_PATTERN
from opennua.protocols.agui import (
    CLIENT_ID,
    InputError,
    RunStream,
    check_ids,
    client_tools,
    content,
    message_key,
    request_turn,
    resume_intents,
    thread_key,
    tool_answer,
    turn_of_message,
    user_message,
)
from opennua.store import NotFound

from ._authz import Acting, Authorized
from ._edge import INTENT_ERRORS, AppContext, Context, errors_doc, guard_json_body
from ._gzip import gzip_send
from ._problems import Problem, problem_response
from ._revocations import Watched
from ._streams import until_first

router = APIRouter(dependencies=[Depends(guard_json_body)])
_ENCODER = EventEncoder()
_ERRORS = errors_doc(
    *INTENT_ERRORS, "session_busy", "input_request_resolved", "gone", "grant_revoked"
)
_STREAM: dict[int | str, dict[str, Any]] = {
    200: {"description": "the AG-UI event stream", "content": {"text/event-stream": {}}}
}


@router.post("/v1/agui/{deployment}", response_class=Response, responses={**_STREAM, **_ERRORS})
async def run_deployment(
    ctx: Context,
    auth: Acting,
    deployment: Annotated[str, Path(pattern=NAME_PATTERN)],
    body: RunAgentInput,
) -> Response:
    """Run the deployment's agent on the thread `threadId` names: one of our session ids
    continues that session; any other id always maps to the same session of this
    workspace and deployment (made on its first run)."""
    _check(body)
    session_id = await _thread_session(ctx, auth, deployment, body.thread_id)
    return await _run(ctx, auth, session_id, body)


@router.post(
    "/v1/agui/sessions/{session_id}", response_class=Response, responses={**_STREAM, **_ERRORS}
)
async def run_session(ctx: Context, auth: Acting, session_id: str, body: RunAgentInput) -> Response:
    """Run on one session (authorization found it), whatever `threadId` says (it is
    echoed)."""
    _check(body)
    return await _run(ctx, auth, session_id, body)


def _check(body: RunAgentInput) -> None:
    try:
        check_ids(body)
    except InputError as exc:
        raise _invalid(exc) from exc


def _invalid(exc: InputError) -> Problem:
    errors = [{"loc": exc.loc, "msg": str(exc), "type": "value_error"}]
    return Problem("validation_error", str(exc), errors=errors)


async def _thread_session(
    ctx: AppContext, auth: Authorized, deployment: str, thread_id: str
) -> str:
    if thread_id.startswith("ses_"):
        # Our own session id: that session, when it is this workspace's and deployment's
        # (another workspace's is as unknown as one that does not exist).
        try:
            record = await ctx.host.session(thread_id)
        except NotFound:
            record = None
        if record is None or (record.workspace_id, record.deployment) != (
            auth.workspace_id,
            deployment,
        ):
            raise Problem("not_found", f"session {thread_id} not found in {deployment}")
        return thread_id
    intent = CreateSession(
        intent_id=thread_key(auth.workspace_id, deployment, thread_id),
        client_id=CLIENT_ID,
        deployment=deployment,
        metadata={"agui_thread_id": thread_id},
    )
    result = await ctx.host.submit(None, intent, actor=auth.actor(ctx.authority))
    _count(ctx, "create_session", result)
    if result.type != "accepted":
        raise _refused(result)
    return result.ids["session_id"]


async def _run(ctx: AppContext, auth: Authorized, session_id: str, body: RunAgentInput) -> Response:
    _, before = await ctx.host.snapshot(session_id)
    actor = auth.actor(ctx.authority)
    turn_id: str | None = None
    reconnect = True
    try:
        if body.resume:
            for intent in resume_intents(session_id, body.run_id, before, body.resume):
                result = await ctx.host.submit(session_id, intent, actor=actor)
                _count(ctx, intent.type, result)
                if result.type != "accepted":
                    return _refusal(result)
            turn_id = request_turn(before, body.resume[0].interrupt_id)
        elif (answer := tool_answer(session_id, body, before)) is not None:
            # The client ran its tool: the result answers the call's request, and the
            # run follows the turn that waited for it.
            result = await ctx.host.submit(session_id, answer, actor=actor)
            _count(ctx, answer.type, result)
            if result.type != "accepted":
                return _refusal(result)
            turn_id = request_turn(before, answer.request_id)
        elif (message := user_message(body, before)) is not None:
            index = len(body.messages) - 1
            send = SendMessage(
                intent_id=message_key(session_id, message.id),
                client_id=CLIENT_ID,
                content=content(message, index),
                client_tools=client_tools(body),
            )
            result = await ctx.host.submit(session_id, send, actor=actor)
            _count(ctx, send.type, result)
            if result.type != "accepted":
                return _refusal(result)
            turn_id = result.ids["turn_id"]
            # A turn this request started streams from its first event; a re-sent
            # message (its turn began before) is a reconnect.
            reconnect = any(t["turn_id"] == turn_id for t in before["turns"])
        elif body.messages:
            turn_id = turn_of_message(before, body.messages[-1].id)
    except InputError as exc:
        raise _invalid(exc) from exc
    _, state = await ctx.host.snapshot(session_id)
    stream = RunStream(
        state,
        thread_id=body.thread_id,
        run_id=body.run_id,
        turn_id=turn_id,
        reconnect=reconnect,
    )
    return AguiResponse(
        ctx.hub,
        session_id,
        stream,
        heartbeat=ctx.heartbeat_seconds,
        send_timeout=ctx.send_timeout_seconds,
        watch=ctx.streams.watching(auth.caller, auth.workspace_id),
    )


def _count(ctx: AppContext, kind: str, result: IntentResult) -> None:
    ctx.metrics.intents.labels(intent=kind, result=result.type).inc()


def _refused(result: IntentResult) -> Problem:
    if result.type == "conflict":
        return Problem(result.code, "another answer won", resolution=result.resolution)
    assert result.type == "rejected"
    return Problem(result.code, result.message)


def _refusal(result: IntentResult) -> Response:
    problem = _refused(result)
    return problem_response(problem.code, problem.detail, **problem.extra)


class AguiResponse(Response):
    """The run's `text/event-stream`: its opening, then the events each appended action
    causes, until the run ends. Every write has the send timeout; a peer that stops
    reading, leaves, or may no longer read the session ends it."""

    def __init__(
        self,
        hub: Hub,
        session_id: str,
        stream: RunStream,
        *,
        heartbeat: float,
        send_timeout: float,
        watch: contextlib.AbstractAsyncContextManager[Watched],
    ) -> None:
        self._hub = hub
        self._session_id = session_id
        self._stream = stream
        self._after = stream.state["seq"]
        self._heartbeat = heartbeat
        self._send_timeout = send_timeout
        self._watch = watch
        self.status_code = 200
        self.background = None
        self.media_type = _ENCODER.get_content_type()
        self.init_headers({"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def listen() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        listener = asyncio.ensure_future(listen())
        async with self._watch as watched:
            pump = asyncio.ensure_future(self._pump(gzip_send(scope, send), watched))
            await until_first(pump, listener)
        if pump.done() and not pump.cancelled():
            error = pump.exception()
            if error is not None and not isinstance(error, OSError):
                raise error

    async def _pump(self, send: Send, watched: Watched) -> None:
        async def write(events: list[BaseEvent] | str, more: bool = True) -> None:
            text = events if isinstance(events, str) else "".join(map(_ENCODER.encode, events))
            # A stalled reader raises TimeoutError (an OSError): the stream just ends.
            async with asyncio.timeout(self._send_timeout):
                await send({"type": "http.response.body", "body": text.encode(), "more_body": more})

        run = self._stream
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await write(run.opening())
        if not run.done:
            async with self._hub.subscribe(self._session_id, self._after) as subscription:
                watched.attach(subscription)
                async for batch in subscription.batches(self._heartbeat):
                    if not batch:
                        await write(": heartbeat\n\n")
                        continue
                    events: list[BaseEvent] = []
                    for frame in batch:
                        if frame.kind == "resync":
                            # Too far behind to be caught up in place: the client runs again
                            # (the same thread) and is sent snapshots.
                            why = "the client fell behind; run the thread again to catch up"
                            events.append(RunErrorEvent(message=why, code="resync"))
                            run.done = True
                            break
                        events.extend(run.feed(json.loads(frame.json)))
                        if run.done:
                            break
                    await write(events)
                    if run.done:
                        break
        if not run.done and watched.denied is not None:
            await write([RunErrorEvent(message=watched.denied.detail, code=watched.denied.code)])
        await write("", more=False)
