"""RFC 9457 problem details with a stable `code`, and the mapping of failures onto them.

Every error leaves the API as `application/problem+json`; clients branch on `code`, never
on `title` or `detail` wording. Store errors are translated here, at the edge.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from opennua.store import BlobCorrupted, NotFound, Unavailable

PROBLEM_JSON = "application/problem+json"

#: code -> (HTTP status, title). Stable: documented in docs/server.md.
CODES: dict[str, tuple[int, str]] = {
    "bad_request": (400, "Bad request"),
    "unauthorized": (401, "Authentication required"),
    "forbidden": (403, "Forbidden"),
    "not_found": (404, "Not found"),
    "method_not_allowed": (405, "Method not allowed"),
    "session_busy": (409, "Session busy"),
    "turn_active": (409, "Turn still active"),
    "turn_not_active": (409, "No active turn"),
    "input_request_resolved": (409, "Input request already resolved"),
    "request_in_flight": (409, "Request in flight"),
    "gone": (410, "Gone"),
    "payload_too_large": (413, "Payload too large"),
    "validation_error": (422, "Validation error"),
    "idempotency_key_reused": (422, "Idempotency key reused"),
    "internal_error": (500, "Internal error"),
    "blob_corrupted": (500, "Stored content is corrupted"),
    "unavailable": (503, "Service unavailable"),
}

_BY_STATUS = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized", 400: "bad_request"}


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


def problem_response(code: str, detail: str, **extra: Any) -> JSONResponse:
    status, body = problem_body(code, detail, **extra)
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON)


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
        return JSONResponse(body, status_code=exc.status_code, media_type=PROBLEM_JSON)

    @app.exception_handler(NotFound)
    async def _not_found(request: Request, exc: NotFound) -> JSONResponse:
        return problem_response("not_found", f"{exc.kind} {exc.key} not found")

    @app.exception_handler(Unavailable)
    async def _unavailable(request: Request, exc: Unavailable) -> JSONResponse:
        return problem_response("unavailable", "the store is unavailable; retry later")

    @app.exception_handler(BlobCorrupted)
    async def _corrupted(request: Request, exc: BlobCorrupted) -> JSONResponse:
        return problem_response("blob_corrupted", "the artifact's stored bytes do not verify")
