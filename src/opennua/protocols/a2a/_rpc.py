"""The A2A JSON-RPC envelope (pure): a request body parsed into a method and its typed
params, and every error in the shape A2A defines (codes from the SDK's map)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    A2A_ERROR_REASONS,
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    MethodNotFoundError,
    VersionNotSupportedError,
)
from google.protobuf.json_format import ParseDict
from google.protobuf.message import Message as Proto

from opennua.protocols.a2a._card import PROTOCOL_VERSION

#: The binding's methods, their params, and whether they change anything ("act") or
#: only read ("read"): the permission each needs.
METHODS: dict[str, tuple[type[Proto], str]] = {
    "SendMessage": (SendMessageRequest, "act"),
    "SendStreamingMessage": (SendMessageRequest, "act"),
    "GetTask": (GetTaskRequest, "read"),
    "ListTasks": (ListTasksRequest, "read"),
    "CancelTask": (CancelTaskRequest, "act"),
    "SubscribeToTask": (SubscribeToTaskRequest, "read"),
    "CreateTaskPushNotificationConfig": (TaskPushNotificationConfig, "act"),
    "GetTaskPushNotificationConfig": (GetTaskPushNotificationConfigRequest, "read"),
    "ListTaskPushNotificationConfigs": (ListTaskPushNotificationConfigsRequest, "read"),
    "DeleteTaskPushNotificationConfig": (DeleteTaskPushNotificationConfigRequest, "act"),
    "GetExtendedAgentCard": (GetExtendedAgentCardRequest, "read"),
}
STREAMING = frozenset({"SendStreamingMessage", "SubscribeToTask"})
#: Deeper JSON than any A2A request needs is refused before it reaches a parser.
MAX_DEPTH = 64

RequestId = str | int | None


@dataclass(frozen=True)
class Call:
    id: RequestId
    method: str
    params: Any
    need: str


class RpcError(Exception):
    """An error answered in JSON-RPC's shape, for request `id`."""

    def __init__(self, error: A2AError, request_id: RequestId = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.id = request_id


def error_body(error: A2AError, request_id: RequestId) -> dict[str, Any]:
    """`{"jsonrpc": "2.0", "id": …, "error": {code, message, data}}`, `data` as the
    SDK writes it (a `google.rpc.ErrorInfo` naming the A2A reason)."""
    metadata = error.data if isinstance(error.data, dict) else {}
    info = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": A2A_ERROR_REASONS.get(type(error), "UNKNOWN_ERROR"),
        "domain": "a2a-protocol.org",
        "metadata": {str(k): str(v) for k, v in metadata.items()},
    }
    code = JSON_RPC_ERROR_CODE_MAP.get(type(error), -32603)
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": str(error), "data": [info]},
    }


def result_body(result: Any, request_id: RequestId) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _clean(value: Any) -> str | None:
    """Why the parsed JSON cannot be taken (a lone surrogate, a non-finite number, too
    deep), or None. Iterative: the input may be arbitrarily deep."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return "the JSON is nested too deeply"
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "text holds a lone surrogate"
        elif isinstance(item, float) and not math.isfinite(item):
            return "numbers must be finite"
        elif isinstance(item, dict):
            for key, child in item.items():
                stack.append((key, depth + 1))
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return None


def parse_call(body: bytes, version: str | None = None) -> Call:
    """The call a request body makes; `RpcError` with the code A2A gives each fault.
    `version`: the `A2A-Version` header, when sent (its major must be ours: 1)."""
    try:
        data = json.loads(body)
    except RecursionError:
        raise RpcError(InvalidRequestError("the JSON is nested too deeply")) from None
    except ValueError as exc:
        raise RpcError(JSONParseError(f"not JSON: {exc}")) from None
    if not isinstance(data, dict):
        raise RpcError(InvalidRequestError("a request is one JSON object (no batches)"))
    request_id = data.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int | None):
        raise RpcError(InvalidRequestError("id must be a string, an integer or null"))
    if isinstance(request_id, str) and _clean(request_id) is not None:
        request_id = None
    why = _clean(data)
    if why is not None:
        raise RpcError(InvalidRequestError(why), request_id)
    if data.get("jsonrpc") != "2.0":
        raise RpcError(InvalidRequestError("'jsonrpc' must be exactly '2.0'"), request_id)
    method = data.get("method")
    if not isinstance(method, str) or not method:
        raise RpcError(InvalidRequestError("method is required"), request_id)
    found = METHODS.get(method)
    if found is None:
        raise RpcError(MethodNotFoundError(f"no method {method[:100]!r}"), request_id)
    model, need = found
    if version is not None and version.strip().split(".")[0] != PROTOCOL_VERSION.split(".")[0]:
        raise RpcError(
            VersionNotSupportedError(
                f"A2A {version[:20]!r} is not served here: {PROTOCOL_VERSION}"
            ),
            request_id,
        )
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise RpcError(InvalidParamsError("params must be an object"), request_id)
    try:
        # Unknown fields are ignored, as the SDK's own server does (forward compatible).
        parsed = ParseDict(params, model(), ignore_unknown_fields=True)
    except Exception as exc:  # json_format raises ParseError, and TypeError/ValueError
        raise RpcError(InvalidParamsError(f"invalid params: {exc}"), request_id) from None
    return Call(request_id, method, parsed, need)
