"""RFC 9457 problem details with a stable `code`, and the mapping of failures onto them.

Every error leaves the API as `application/problem+json`; clients branch on `code`, never
on `title` or `detail` wording. The errors of the store, the Host, auth and automation are
translated here, at the edge, in one table (`FAILURES`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Route

from opennua.auth import Denied
from opennua.automation import AutomationError
from opennua.host import Refused
from opennua.store import (
    BlobCorrupted,
    CommitUnknown,
    InvalidInput,
    NotFound,
    Unavailable,
    WriteConflict,
)

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
    "plugin_not_visible": (409, "Plugin not readable by the execution principal"),
    "last_server_admin": (409, "The last server admin"),
    "files_missing": (409, "Plugin files not uploaded"),
    "gone": (410, "Gone"),
    "link_expired": (410, "Download link expired"),
    "link_used": (410, "Download link already used"),
    "payload_too_large": (413, "Payload too large"),
    "workspace_quota_exceeded": (413, "Workspace storage quota exceeded"),
    "unsupported_media_type": (415, "Unsupported media type"),
    "host_not_allowed": (421, "Host not allowed"),
    "validation_error": (422, "Validation error"),
    "idempotency_key_reused": (422, "Idempotency key reused"),
    "invalid_plugin": (422, "Invalid plugin"),
    "plugin_too_large": (422, "Plugin too large"),
    "invalid_deployment": (422, "Invalid deployment"),
    "invalid_schedule": (422, "Invalid schedule"),
    "invalid_hook": (422, "Invalid hook"),
    "invalid_subscription": (422, "Invalid subscription"),
    "unknown_command": (422, "Unknown slash command"),
    "client_tool_conflict": (422, "Client tool named like an agent tool"),
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


class Problem(Refused):
    """Raise anywhere in a route to answer with problem JSON (`code`, `detail` and more
    members): the Host's refusal, raised by the server itself."""


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

    for kind in FAILURES:
        app.add_exception_handler(kind, _failure)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        # Starlette still re-raises after this response, so the error is logged.
        return problem_response("internal_error", "an unexpected error occurred")


async def _failure(request: Request, exc: Exception) -> JSONResponse:
    # The most specific entry wins, as Starlette picks the handler (by the MRO).
    kind = next(k for k in type(exc).__mro__ if k in FAILURES)
    code, detail, extra = FAILURES[kind](exc)
    return problem_response(code, detail, **extra)


Mapped = tuple[str, str, dict[str, Any]]

#: A failure raised by the packages behind the routes -> (code, detail, extra members).
FAILURES: dict[type[Exception], Callable[[Any], Mapped]] = {
    NotFound: lambda exc: ("not_found", f"{exc.kind} {exc.key} not found", {}),
    InvalidInput: lambda exc: ("validation_error", exc.reason, {}),
    WriteConflict: lambda exc: ("already_exists", str(exc), {}),
    Unavailable: lambda exc: ("unavailable", "the store is unavailable; retry later", {}),
    # The database went away at COMMIT (a restart): the write may have landed. A
    # retransmission under the same Idempotency-Key replays it or does it, once.
    CommitUnknown: lambda exc: (
        "unavailable",
        "the store went away while committing; retry with the same key",
        {},
    ),
    BlobCorrupted: lambda exc: ("blob_corrupted", "the artifact's stored bytes do not verify", {}),
    Refused: lambda exc: (exc.code, exc.detail, exc.extra),
    Denied: lambda exc: (exc.code, exc.detail, {}),
    AutomationError: lambda exc: (exc.code, exc.detail, {}),
}
