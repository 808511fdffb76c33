"""The FastAPI app: every route of DESIGN.md §7 over one SessionHost.

Routes are thin: they build the protocol's intent objects (the same ones the WebSocket
takes), hand them to the Host and map its results onto HTTP. All arbitration and every
durable write happens in the Host and the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Header, Query, Request, WebSocket
from fastapi.responses import (
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from opennua.host import CreateSession, Hub, SessionHost, rfc3339
from opennua.protocol import (
    AnswerInput,
    Cancel,
    IntentResult,
    RetryTurn,
    SendMessage,
    UpdateSession,
)
from opennua.protocol.actions import ContentPart, Id
from opennua.store import InvalidInput, NotFound, Store

from . import _problems
from ._guard import COOKIE, Guard, cookie_value
from ._metrics import Metrics
from ._problems import PROBLEM_JSON, Problem, problem_response
from ._streams import HEARTBEAT_SECONDS, dispatch, sse_stream, websocket_session
from ._web import WebUI

MAX_BODY = 1 << 20


def _errors_doc(*codes: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for the problem codes a route may answer with."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in ("unauthorized", *codes):
        status = _problems.CODES[code][0]
        entry = out.setdefault(status, {"description": "", "content": {PROBLEM_JSON: {}}})
        entry["description"] = ", ".join(filter(None, [entry["description"], f"`{code}`"]))
    return out


_INTENT_ERRORS = ("not_found", "validation_error", "idempotency_key_reused", "request_in_flight")
IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=128)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")
    client_id: Id = "http"
    intent_id: Id | None = None


class CreateSessionBody(_Body):
    title: str = Field(default="", max_length=200)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)


class UpdateSessionBody(_Body):
    title: Annotated[str, Field(min_length=1, max_length=200)]


class MessageBody(_Body):
    content: Annotated[list[ContentPart], Field(min_length=1, max_length=64)]
    if_busy: Literal["reject", "enqueue", "interrupt"] = "enqueue"


class CancelBody(_Body):
    turn_id: Id | None = None


class AnswerBody(_Body):
    option_id: Id | None = None
    payload: JsonValue = None


class RetryBody(_Body):
    pass


def create_app(
    host: SessionHost,
    store: Store,
    hub: Hub,
    *,
    token: str,
    metrics: Metrics | None = None,
    max_body: int = MAX_BODY,
    heartbeat_seconds: float = HEARTBEAT_SECONDS,
    follow_store: bool = True,
) -> FastAPI:
    """The HTTP/SSE/WebSocket surface of one Host.

    `follow_store` runs `hub.follow(store.watch())` and `host.keep_snapshots(...)` for the
    app's lifetime, so actions appended by supervisors (in this process or another) reach
    subscribers and snapshots keep up; pass False when the composition root runs them.
    """
    metrics = metrics or Metrics()
    metrics.watch_hub(hub)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not follow_store:
            yield
            return
        watchers = [store.watch(), store.watch()]
        tasks = [
            asyncio.ensure_future(hub.follow(watchers[0])),
            asyncio.ensure_future(host.keep_snapshots(watchers[1])),
        ]
        try:
            yield
        finally:
            for watcher in watchers:
                watcher.close()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task

    app = FastAPI(
        title="opennua",
        version="1",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    _problems.install(app)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        # Starlette still re-raises after this response, so the error is logged.
        return problem_response("internal_error", "an unexpected error occurred")

    @app.exception_handler(InvalidInput)
    async def _invalid_input(request: Request, exc: InvalidInput) -> JSONResponse:
        return problem_response("validation_error", exc.reason)

    def intent_id(body: _Body, header: str | None) -> str:
        if header and body.intent_id and header != body.intent_id:
            raise Problem("validation_error", "Idempotency-Key and intent_id differ")
        return header or body.intent_id or host.new_intent_id()

    def build(cls: type[Any], **fields: Any) -> Any:
        try:
            return cls(**fields)
        except ValidationError as exc:
            errors = [
                {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
                for e in exc.errors(include_url=False)
            ]
            raise Problem("validation_error", "the intent is invalid", errors=errors) from exc

    def answer(kind: str, result: IntentResult, status: int, body: dict[str, Any]) -> JSONResponse:
        metrics.intents.labels(intent=kind, result=result.type).inc()
        if result.type == "rejected":
            return problem_response(result.code, result.message, intent_id=result.intent_id)
        if result.type == "conflict":
            return problem_response(
                result.code,
                "another intent won",
                intent_id=result.intent_id,
                resolution=result.resolution,
            )
        return JSONResponse(body, status_code=status)

    # -- health, metrics, login ---------------------------------------------------------

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        try:
            await asyncio.wait_for(store.list_sessions(limit=1), timeout=5)
        except Exception:
            return problem_response("unavailable", "the store does not answer")
        return JSONResponse({"status": "ready"})

    @app.get("/metrics", include_in_schema=False)
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/login", include_in_schema=False)
    async def login(request: Request, token: str = "") -> Response:
        # The one place a token travels in a query string: the link `nua serve` prints.
        # It is exchanged at once for a cookie and the browser is sent away from this URL.
        if not token or not hmac.compare_digest(token.encode(), host_token):
            return problem_response("unauthorized", "the login token is not valid")
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE,
            cookie_value(token),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    host_token = token.encode()

    # -- sessions -------------------------------------------------------------------------

    @app.post("/v1/sessions", status_code=201, responses=_errors_doc(*_INTENT_ERRORS))
    async def create_session(body: CreateSessionBody, key: IdempotencyKey = None) -> JSONResponse:
        intent = build(
            CreateSession,
            intent_id=intent_id(body, key),
            client_id=body.client_id,
            title=body.title,
            metadata=body.metadata,
        )
        result = await host.create_session(intent)
        ids = result.ids if result.type == "accepted" else {}
        return answer("create_session", result, 201, {"session_id": ids.get("session_id")})

    @app.get("/v1/sessions")
    async def list_sessions(
        limit: Annotated[int, Query(ge=1, le=200)] = 50, cursor: str | None = None
    ) -> dict[str, Any]:
        page = await store.list_sessions(limit=limit, cursor=cursor)
        items = [
            {
                "session_id": s.session_id,
                "title": s.title or "",
                "created_at": rfc3339(s.created_at),
                "last_seq": s.last_seq,
                "metadata": s.metadata or {},
            }
            for s in page.items
        ]
        return {"items": items, "next_cursor": page.next_cursor}

    @app.get("/v1/sessions/{session_id}")
    async def snapshot(session_id: str) -> Response:
        # The canonical state JSON is spliced in as is: no re-encoding of a large state.
        seq, state_json = await host.snapshot_json(session_id)
        body = f'{{"seq":{seq},"state":{state_json}}}'
        return Response(body, media_type="application/json")

    @app.patch("/v1/sessions/{session_id}", responses=_errors_doc(*_INTENT_ERRORS))
    async def update_session(
        session_id: str, body: UpdateSessionBody, key: IdempotencyKey = None
    ) -> JSONResponse:
        intent = build(
            UpdateSession,
            intent_id=intent_id(body, key),
            client_id=body.client_id,
            title=body.title,
        )
        result = await host.update_session(session_id, intent)
        return answer("update_session", result, 200, {"session_id": session_id})

    @app.get("/v1/sessions/{session_id}/actions")
    async def actions(
        session_id: str,
        after: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> dict[str, Any]:
        page = await host.history(session_id, after, limit)
        next_after = page[-1]["seq"] if page else after
        return {"actions": page, "next_after": next_after, "more": len(page) == limit}

    @app.get("/v1/sessions/{session_id}/events")
    async def events(
        session_id: str,
        after: Annotated[int, Query(ge=0)] = 0,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ) -> StreamingResponse:
        await store.get_session(session_id)
        if last_event_id is not None:
            # EventSource resends the last id it saw on reconnect: it wins over `after`.
            if not last_event_id.isdigit():
                raise Problem("validation_error", "Last-Event-ID must be a seq")
            after = int(last_event_id)
        return StreamingResponse(
            sse_stream(hub, session_id, after, heartbeat_seconds),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @app.websocket("/v1/sessions/{session_id}/ws")
    async def ws(
        websocket: WebSocket, session_id: str, after: int = 0, client_id: str | None = None
    ) -> None:
        try:
            await store.get_session(session_id)
        except NotFound:
            await websocket.close(code=4404, reason="session not found")
            return

        def count(intent: str, result: str) -> None:
            metrics.intents.labels(intent=intent, result=result).inc()

        await websocket_session(
            websocket,
            host,
            hub,
            session_id,
            max(after, 0),
            client_id,
            heartbeat_seconds,
            count,
            max_body,
        )

    # -- intents --------------------------------------------------------------------------

    @app.post(
        "/v1/sessions/{session_id}/messages",
        status_code=202,
        responses=_errors_doc(*_INTENT_ERRORS, "session_busy"),
    )
    async def send_message(
        session_id: str, body: MessageBody, key: IdempotencyKey = None
    ) -> JSONResponse:
        intent = build(
            SendMessage,
            intent_id=intent_id(body, key),
            client_id=body.client_id,
            content=body.content,
            if_busy=body.if_busy,
        )
        result = await dispatch(host, session_id, intent)
        return answer(intent.type, result, 202, _ids(result, "turn_id", "execution_id"))

    @app.post(
        "/v1/sessions/{session_id}/cancel",
        status_code=202,
        responses=_errors_doc(*_INTENT_ERRORS, "turn_not_active"),
    )
    async def cancel(session_id: str, body: CancelBody, key: IdempotencyKey = None) -> JSONResponse:
        intent = build(
            Cancel, intent_id=intent_id(body, key), client_id=body.client_id, turn_id=body.turn_id
        )
        result = await dispatch(host, session_id, intent)
        return answer(intent.type, result, 202, _ids(result, "turn_id", "execution_id"))

    @app.post(
        "/v1/sessions/{session_id}/input-requests/{request_id}/answer",
        responses=_errors_doc(*_INTENT_ERRORS, "input_request_resolved", "gone"),
    )
    async def answer_input(
        session_id: str, request_id: str, body: AnswerBody, key: IdempotencyKey = None
    ) -> JSONResponse:
        intent = build(
            AnswerInput,
            intent_id=intent_id(body, key),
            client_id=body.client_id,
            request_id=request_id,
            option_id=body.option_id,
            payload=body.payload,
        )
        result = await dispatch(host, session_id, intent)
        resolution = None
        if result.type == "accepted":
            resolution = (await store.get_input_request(request_id)).resolution
        return answer("answer_input", result, 200, {"resolution": resolution})

    @app.post(
        "/v1/sessions/{session_id}/turns/{turn_id}/retry",
        status_code=202,
        responses=_errors_doc(*_INTENT_ERRORS, "turn_active"),
    )
    async def retry(
        session_id: str, turn_id: str, body: RetryBody, key: IdempotencyKey = None
    ) -> JSONResponse:
        intent = build(
            RetryTurn, intent_id=intent_id(body, key), client_id=body.client_id, turn_id=turn_id
        )
        result = await dispatch(host, session_id, intent)
        return answer(intent.type, result, 202, _ids(result, "turn_id", "execution_id"))

    # -- executions and artifacts -----------------------------------------------------------

    @app.get("/v1/executions/{execution_id}")
    async def execution(execution_id: str) -> dict[str, Any]:
        e = await store.get_execution(execution_id)
        attempts = await store.list_attempts(execution_id)
        return {
            "execution_id": e.execution_id,
            "session_id": e.session_id,
            "turn_id": e.turn_id,
            "status": e.status,
            "retry_of": e.retry_of,
            "attempt": e.attempt,
            "epoch": e.epoch,
            "owner": e.owner,
            "cancel_requested": e.cancel_requested,
            "created_at": rfc3339(e.created_at),
            "deadline_at": _ts(e.deadline_at),
            "lease_expires_at": _ts(e.lease_expires_at),
            "finished_at": _ts(e.finished_at),
            "snapshot_digest": e.snapshot_digest,
            "error": e.error,
            "attempts": [
                {
                    "attempt_id": a.attempt_id,
                    "attempt": a.attempt,
                    "epoch": a.epoch,
                    "supervisor_id": a.supervisor_id,
                    "claimed_at": rfc3339(a.claimed_at),
                }
                for a in attempts
            ],
        }

    @app.get("/v1/artifacts/{artifact_id}")
    async def artifact(artifact_id: str) -> dict[str, Any]:
        a = await store.get_artifact(artifact_id)
        return {
            "artifact_id": a.artifact_id,
            "session_id": a.session_id,
            "name": a.name,
            "media_type": a.media_type,
            "size": a.size,
            "sha256": a.sha256,
            "created_at": rfc3339(a.created_at),
            "turn_id": a.turn_id,
            "tool_call_id": a.tool_call_id,
        }

    @app.get("/v1/artifacts/{artifact_id}/content")
    async def artifact_content(artifact_id: str) -> Response:
        a = await store.get_artifact(artifact_id)
        data = await store.blobs.read(a.sha256)  # re-hashes: corruption is an error, not bytes
        filename = a.name.replace('"', "").replace("\\", "")
        return Response(
            data,
            media_type=a.media_type,
            headers={
                "Content-Disposition": f'attachment; filename="{filename}"',
                "ETag": f'"{a.sha256}"',
                "X-Content-Type-Options": "nosniff",
            },
        )

    @app.get("/v1/sessions/{session_id}/tool-calls/{tool_call_id}/output")
    async def tool_output(session_id: str, tool_call_id: str) -> Response:
        # A large output travels by reference (`output_ref`, a blob sha256) with a preview.
        # It is served only as the output of a tool call of this session: a sha alone opens
        # nothing, so a blob is exactly as readable as the session that produced it.
        _, state = await host.snapshot(session_id)
        ref = next(
            (
                t["tool_calls"][tool_call_id]["output_ref"]
                for t in state["turns"]
                if tool_call_id in t["tool_calls"]
            ),
            None,
        )
        sha = (ref or "").removeprefix("blob:").removeprefix("sha256:")
        if not ref or not sha:
            raise Problem("not_found", "this tool call has no stored output")
        data = await store.blobs.read(sha)
        return Response(
            data,
            media_type="text/plain; charset=utf-8",
            headers={
                "Content-Disposition": f'inline; filename="{tool_call_id}.txt"',
                "Content-Security-Policy": "sandbox",
                "X-Content-Type-Options": "nosniff",
            },
        )

    app.state.metrics = metrics
    app.state.host = host
    # Nothing, including 404s for unknown paths, is answered before auth ...
    app.add_middleware(Guard, token=token, max_body=max_body)
    # ... except the web UI's own static files (added last, so outermost): public code that
    # holds no session data and must load to show a logged-out visitor how to log in.
    app.add_middleware(WebUI)
    return app


def _ids(result: IntentResult, *names: str) -> dict[str, Any]:
    ids = result.ids if result.type == "accepted" else {}
    return {name: ids.get(name) for name in names}


def _ts(value: float | None) -> str | None:
    return None if value is None else rfc3339(value)
