"""The client's errors: one root, one type per outcome a caller branches on.

The server answers every failure with RFC 9457 problem JSON carrying a stable `code`
(docs/server.md); `error_from_response` translates it here, at the edge, so callers catch
`ConflictError` rather than inspecting status numbers.
"""

from __future__ import annotations

from typing import Any

import httpx


class ClientError(Exception):
    """Root of every error this package raises."""


class UnreachableError(ClientError):
    """The server did not answer (refused, reset, timed out) within the allowed time."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"server unreachable at {url}: {reason}")
        self.url = url
        self.reason = reason


class IntegrityError(ClientError):
    """Downloaded bytes do not match the digest the server published for them."""

    def __init__(self, artifact_id: str, expected: str, actual: str) -> None:
        super().__init__(f"artifact {artifact_id}: sha256 {actual} != published {expected}")
        self.artifact_id = artifact_id
        self.expected = expected
        self.actual = actual


class ApiError(ClientError):
    """The server answered with a problem document."""

    def __init__(self, status: int, code: str, detail: str, body: dict[str, Any]) -> None:
        super().__init__(f"{code} ({status}): {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.body = body


class UnauthorizedError(ApiError):
    """401/403: no token, a wrong token, or a forbidden origin."""


class NotFoundError(ApiError):
    """404: unknown session, turn, input request, execution or artifact."""


class ConflictError(ApiError):
    """409: another intent won, or the session's state does not allow this one.

    For `input_request_resolved` the body carries the winning `resolution`, including
    `answered_by {client_id, principal_id}`: who answered first.
    """

    @property
    def resolution(self) -> dict[str, Any] | None:
        value = self.body.get("resolution")
        return value if isinstance(value, dict) else None

    @property
    def answered_by(self) -> dict[str, Any] | None:
        by = (self.resolution or {}).get("answered_by")
        return by if isinstance(by, dict) else None


class GoneError(ApiError):
    """410: the input request expired or was cancelled, or its turn ended."""


class InvalidRequestError(ApiError):
    """422 (and other 4xx): the intent does not validate, e.g. an option not offered."""

    @property
    def errors(self) -> list[Any]:
        value = self.body.get("errors")
        return value if isinstance(value, list) else []


class ServerError(ApiError):
    """5xx: the server failed or its store is unavailable."""


def error_from_response(response: httpx.Response) -> ApiError:
    """The typed error for a non-2xx response (problem JSON, or whatever came back)."""
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"detail": response.text[:500]}
    code = str(body.get("code") or _DEFAULT_CODES.get(status, f"http_{status}"))
    detail = str(body.get("detail") or body.get("title") or response.reason_phrase)
    kind: type[ApiError]
    if status in (401, 403):
        kind = UnauthorizedError
    elif status == 404:
        kind = NotFoundError
    elif status == 409:
        kind = ConflictError
    elif status == 410:
        kind = GoneError
    elif status >= 500:
        kind = ServerError
    else:
        kind = InvalidRequestError
    return kind(status, code, detail, body)


_DEFAULT_CODES = {
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    410: "gone",
    422: "validation_error",
    500: "internal_error",
    502: "bad_gateway",
    503: "unavailable",
    504: "gateway_timeout",
}
