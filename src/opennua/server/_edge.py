"""What every route shares: the app's context, intent bodies, the JSON guard, result mapping.

The JSON guard runs on every JSON body and every WebSocket intent before validation: a
lone surrogate cannot be encoded as UTF-8 (the store, the log and every client would fail
on it later), a non-finite number is not JSON, and nesting deeper than any intent needs
only costs stack. Each is a 422 that names where it was found.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationError,
    WithJsonSchema,
)
from starlette.requests import HTTPConnection

from opennua.auth import Authority
from opennua.automation import Automation, Subscriptions
from opennua.host import Hub, SessionHost
from opennua.protocol import IntentResult, timestamp
from opennua.protocol.actions import Id, ResourceLinkPart, TextPart
from opennua.protocol.intents import (
    AnswerFields,
    CancelFields,
    Content,
    CreateSessionFields,
    DeliveryFields,
    SendMessageFields,
    UpdateSessionFields,
)
from opennua.secrets import SecretStore
from opennua.store import Store

from . import _problems
from ._metrics import Metrics
from ._problems import PROBLEM_JSON, Problem, problem_response
from ._revocations import Streams

IntentT = TypeVar("IntentT", bound=BaseModel)
#: The largest seq a cursor may name: the stores keep seqs in signed 64-bit integers.
MAX_SEQ = (1 << 63) - 1
#: Deeper JSON than any intent needs is refused before it reaches a recursive parser.
MAX_DEPTH = 64


@dataclass(frozen=True)
class AppContext:
    """What the routes of one app work with (`app.state.context`)."""

    host: SessionHost
    hub: Hub
    metrics: Metrics
    authority: Authority
    clock: Callable[[], float]
    heartbeat_seconds: float
    send_timeout_seconds: float
    #: Only `/readyz` and `/v1/audit` (the gateway's records) read the store itself;
    #: every other route goes through the Host.
    store: Store
    #: Schedules and webhooks (docs/automation.md).
    automation: Automation
    #: Event subscriptions (docs/subscriptions.md).
    subscriptions: Subscriptions
    #: The open SSE and WebSocket streams, re-checked after a revocation.
    streams: Streams
    #: The workspace secrets (`/v1/secrets`); None: the routes answer `unavailable`.
    secrets: SecretStore | None = None


async def _context(connection: HTTPConnection) -> AppContext:
    # async although it awaits nothing: FastAPI runs a plain `def` dependency in a worker
    # thread, a hop per request that was a tenth of a webhook delivery's time.
    context: AppContext = connection.app.state.context
    return context


Context = Annotated[AppContext, Depends(_context)]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=128,
        description="The intent's key (wins over a body `intent_id`); see docs/server.md",
    ),
]


# -- the JSON guard ------------------------------------------------------------------------


def json_problems(value: Any, root: tuple[str | int, ...] = ()) -> list[dict[str, Any]]:
    """Where `value` (parsed JSON) holds a lone surrogate, a non-finite number or nesting
    beyond MAX_DEPTH; [] when it is clean. Iterative: the input may be arbitrarily deep."""
    found: list[dict[str, Any]] = []
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, root)]
    while stack and len(found) < 10:
        item, loc = stack.pop()
        if len(loc) - len(root) > MAX_DEPTH:
            found.append(_error(loc[: len(root) + MAX_DEPTH], "too_deep", "nested too deeply"))
            continue
        if isinstance(item, str):
            if _has_surrogate(item):
                found.append(_error(loc, "lone_surrogate", "text holds a lone surrogate"))
        elif isinstance(item, float):
            if not math.isfinite(item):
                found.append(_error(loc, "non_finite", "numbers must be finite"))
        elif isinstance(item, dict):
            for key, child in item.items():
                if _has_surrogate(key):
                    found.append(
                        _error((*loc, key), "lone_surrogate", "key holds a lone surrogate")
                    )
                stack.append((child, (*loc, key)))
        elif isinstance(item, list):
            stack.extend((child, (*loc, i)) for i, child in enumerate(item))
    return found


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _error(loc: tuple[str | int, ...], kind: str, msg: str) -> dict[str, Any]:
    return {"loc": [_printable(part) for part in loc], "msg": msg, "type": kind}


def _printable(part: str | int) -> str | int:
    if isinstance(part, str):
        return part.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
    return part


async def guard_json_body(request: Request) -> None:
    """A dependency of every route that takes a JSON body (FastAPI has parsed it by now)."""
    if not await request.body():
        return
    try:
        data = await request.json()
    except ValueError:
        return  # FastAPI reports the undecodable body itself
    problems = json_problems(data, ("body",))
    if problems:
        raise RequestValidationError(problems)


# -- intents over HTTP -----------------------------------------------------------------------


class _Body(BaseModel):
    """What every intent's body adds to the intent's own fields (which it inherits, rules
    and all, from `opennua.protocol.intents`): the client, and the key unless the
    `Idempotency-Key` header gives it. The path names the session and what is acted on."""

    model_config = ConfigDict(extra="forbid", frozen=False)
    client_id: Id = "http"
    intent_id: Id | None = None


class CreateSessionBody(CreateSessionFields, _Body):
    pass


class UpdateSessionBody(UpdateSessionFields, _Body):
    pass


def _parts_schema() -> dict[str, Any]:
    """The content parts as validated: a part's `type` picks its shape, so it is required
    in the document even where the model has a default (a part without one is "other")."""
    known = []
    for part in (TextPart, ResourceLinkPart):
        schema = part.model_json_schema()
        schema["required"] = sorted({*schema.get("required", []), "type"})
        known.append(schema)
    other = {
        "type": "object",
        "required": ["type"],
        "properties": {"type": {"type": "string", "not": {"enum": ["text", "resource_link"]}}},
        "description": "a part of a type this version does not know, kept as it came",
    }
    return {"type": "array", "minItems": 1, "maxItems": 64, "items": {"oneOf": [*known, other]}}


def _text_shorthand(value: Any) -> Any:
    """`"content": "hello"` is one text part: what an outside client sends first."""
    return [{"type": "text", "text": value}] if isinstance(value, str) and value else value


def _content_schema() -> dict[str, Any]:
    text = {"type": "string", "minLength": 1, "description": "shorthand for one text part"}
    return {"anyOf": [_parts_schema(), text]}


class MessageBody(SendMessageFields, _Body):
    content: Annotated[Content, BeforeValidator(_text_shorthand), WithJsonSchema(_content_schema())]


class CancelBody(CancelFields, _Body):
    pass


class AnswerBody(AnswerFields, _Body):
    pass


class RetryBody(_Body):
    pass


class DeliveryBody(DeliveryFields, _Body):
    """A bridge's report on one external delivery (the path names the delivery)."""


def intent_key(host: SessionHost, body: _Body, header: str | None) -> str:
    """The intent's key: the `Idempotency-Key` header when given (it wins over a body
    `intent_id`, a rule OpenAPI can state), else the body's, else a fresh one."""
    return header or body.intent_id or host.new_intent_id()


def intent_of(cls: type[IntentT], body: _Body, key: str, **path: str) -> IntentT:
    """The protocol's intent from a body its fields were already checked in, its key and
    what the path names (checked here: the path is the client's too)."""
    try:
        return cls(intent_id=key, **body.model_dump(exclude={"intent_id"}), **path)
    except ValidationError as exc:
        errors = [
            {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
            for e in exc.errors(include_url=False)
        ]
        raise Problem("validation_error", "the intent is invalid", errors=errors) from exc


def answer(
    metrics: Metrics, kind: str, result: IntentResult, status: int, body: dict[str, Any]
) -> JSONResponse:
    """The intent's result as HTTP: the success body, or the rejection/conflict as a problem."""
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


def ids(result: IntentResult, *names: str) -> dict[str, Any]:
    found = result.ids if result.type == "accepted" else {}
    return {name: found.get(name) for name in names}


def ts(value: float | None) -> str | None:
    return None if value is None else timestamp(value)


# -- OpenAPI ---------------------------------------------------------------------------------


class ProblemDoc(BaseModel):
    """RFC 9457 problem details; clients branch on `code`."""

    model_config = ConfigDict(extra="allow")
    type: str
    title: str
    status: int
    detail: str
    code: str


_PROBLEM_SCHEMA = ProblemDoc.model_json_schema()
#: Every route can answer these: no or a wrong credential, a Host not allowed, a path
#: or a method that does not exist.
ALWAYS = ("unauthorized", "insufficient_role", "host_not_allowed")
BODY_ERRORS = ("payload_too_large", "validation_error", "bad_request")


def errors_doc(*codes: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for the problem codes a route may answer with."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in (*ALWAYS, *codes):
        status = _problems.CODES[code][0]
        entry = out.setdefault(
            status, {"description": "", "content": {PROBLEM_JSON: {"schema": _PROBLEM_SCHEMA}}}
        )
        entry["description"] = ", ".join(filter(None, [entry["description"], f"`{code}`"]))
    return out


INTENT_ERRORS = (
    *BODY_ERRORS,
    "not_found",
    "idempotency_key_reused",
    "request_in_flight",
    "unavailable",
)
