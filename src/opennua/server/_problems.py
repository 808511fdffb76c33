"""RFC 9457 problem details with a stable `code`, and the mapping of failures onto them.

Every error leaves the API as `application/problem+json`; clients branch on `code`, never
on `title` or `detail` wording. Store errors are translated here, at the edge.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Route

from opennua.store import BlobCorrupted, CommitUnknown, NotFound, Unavailable

PROBLEM_JSON = "application/problem+json"

#: code -> (HTTP status, title). Stable: documented in docs/server.md.
CODES: dict[str, tuple[int, str]] = {
    "bad_request": (400, "Bad request"),
    "unauthorized": (401, "Authentication required"),
    "bad_signature": (401, "Webhook signature not valid"),
    "token_expired": (401, "Token expired"),
    "token_revoked": (401, "Token revoked"),
    "principal_disabled": (401, "Principal disabled"),
    "forbidden": (403, "Forbidden"),
    "insufficient_role": (403, "Insufficient role"),
    "grant_revoked": (403, "Execution grant revoked"),
    "not_found": (404, "Not found"),
    "method_not_allowed": (405, "Method not allowed"),
    "already_exists": (409, "Already exists"),
    "session_busy": (409, "Session busy"),
    "turn_active": (409, "Turn still active"),
    "turn_not_active": (409, "No active turn"),
    "input_request_resolved": (409, "Input request already resolved"),
    "delivery_closed": (409, "Delivery already closed"),
    "request_in_flight": (409, "Request in flight"),
    "version_exists": (409, "Plugin version already published"),
    "name_taken": (409, "Name taken"),
    "no_earlier_release": (409, "Nothing to roll back to"),
    "deployment_unresolvable": (409, "Deployment does not resolve"),
    "files_missing": (409, "Plugin files not uploaded"),
    "gone": (410, "Gone"),
    "link_expired": (410, "Download link expired"),
    "link_used": (410, "Download link already used"),
    "payload_too_large": (413, "Payload too large"),
    "unsupported_media_type": (415, "Unsupported media type"),
    "host_not_allowed": (421, "Host not allowed"),
    "validation_error": (422, "Validation error"),
    "idempotency_key_reused": (422, "Idempotency key reused"),
    "invalid_plugin": (422, "Invalid plugin"),
    "invalid_deployment": (422, "Invalid deployment"),
    "invalid_schedule": (422, "Invalid schedule"),
    "invalid_hook": (422, "Invalid hook"),
    "invalid_payload": (422, "Invalid webhook payload"),
    "invalid_secret": (422, "Invalid secret"),
    "secret_missing": (422, "Credential reference names no secret"),
    "egress_denied": (422, "Host not in the egress list"),
    "internal_error": (500, "Internal error"),
    "blob_corrupted": (500, "Stored content is corrupted"),
    "unavailable": (503, "Service unavailable"),
}

_BY_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
}


class Problem(Exception):
    """Raise anywhere in a route to answer with problem JSON."""

    def __init__(self, code: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.extra = extra


def problem_body(code: str, detail: str, **extra: Any) -> tuple[int, dict[str, Any]]:
    status, title = CODES.get(code, (400, code.replace("_", " ").capitalize()))
    body = {
        "type": f"https://opennua.dev/problems/{code.replace('_', '-')}",
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
        **extra,
    }
    return status, body


def encode_problem(body: dict[str, Any]) -> bytes:
    """ASCII JSON: a detail or a location that echoes client input (a lone surrogate, a
    control character) can never make the error response itself fail to encode."""
    return json.dumps(body, ensure_ascii=True, separators=(",", ":"), default=str).encode()


class ProblemResponse(JSONResponse):
    media_type = PROBLEM_JSON

    def render(self, content: Any) -> bytes:
        return encode_problem(content)


def problem_response(
    code: str, detail: str, *, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    status, body = problem_body(code, detail, **extra)
    return ProblemResponse(body, status_code=status, headers=headers)


def _allowed_methods(request: Request) -> list[str]:
    methods: set[str] = set()
    for pattern, allowed in getattr(request.app.state, "methods_by_path", ()):
        if pattern.match(request.url.path):
            methods |= allowed
    return sorted(methods)


def index_methods(app: FastAPI, routes: Iterable[BaseRoute]) -> None:
    """Remember which methods each path takes, for `Allow` (Starlette's 405 names the
    methods of the first route matching the path, not all of them)."""
    app.state.methods_by_path = [
        (route.path_regex, frozenset(route.methods))
        for route in routes
        if isinstance(route, Route) and route.methods
    ]


def install(app: FastAPI) -> None:
    """Register the handlers that turn every failure into problem JSON."""

    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        return problem_response(exc.code, exc.detail, **exc.extra)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        return problem_response("validation_error", "the request is invalid", errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _BY_STATUS.get(exc.status_code, "bad_request")
        _, body = problem_body(code, str(exc.detail))
        body["status"] = exc.status_code
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # Starlette names the methods of the first route matching the path only.
            headers["Allow"] = ", ".join(_allowed_methods(request))
        return ProblemResponse(body, status_code=exc.status_code, headers=headers)

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, exc: NotFound) -> JSONResponse:
        return problem_response("not_found", f"{exc.kind} {exc.key} not found")

    @app.exception_handler(Unavailable)
    async def _unavailable(request: Request, exc: Unavailable) -> JSONResponse:
        return problem_response("unavailable", "the store is unavailable; retry later")

    @app.exception_handler(CommitUnknown)
    async def _commit_unknown(request: Request, exc: CommitUnknown) -> JSONResponse:
        # The database went away at COMMIT (a restart): the write may have landed. A
        # retransmission under the same Idempotency-Key replays it or does it, once.
        return problem_response(
            "unavailable", "the store went away while committing; retry with the same key"
        )

    @app.exception_handler(BlobCorrupted)
    async def _corrupted(request: Request, exc: BlobCorrupted) -> JSONResponse:
        return problem_response("blob_corrupted", "the artifact's stored bytes do not verify")
