"""JSON-RPC over stdio, strict: every malformed line gets the JSON-RPC error, never a crash.

The SDK's own framing logs and skips a line it cannot parse (the editor waits forever for
an answer) and trusts the shape of what parses (a batch array or an unhashable id stops its
receive loop). This transport answers instead: `-32700` for bytes that are not UTF-8 JSON,
`-32600` for a line over `MAX_MESSAGE_BYTES` or a message that is not a JSON-RPC 2.0
object, `-32602` for a request carrying a lone surrogate (no UTF-8 stream, and so no HTTP
body to the Host, can carry one). It also keeps the JSON-RPC id of each permission request
it sends, so one answered elsewhere can be withdrawn with `$/cancel_request`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

#: Twice the Host's request body limit: JSON escapes inflate, and the Host has the last word.
MAX_MESSAGE_BYTES = 2 << 20

#: The `_meta` key naming our input request on a `session/request_permission`.
REQUEST_META = "opennua/requestId"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602


class _Oversized:
    pass


OVERSIZED = _Oversized()


class StdioTransport:
    """The `acp` Transport (`send`/`receive`/`close`) over an editor's stdin and stdout."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()
        self._closed = False
        self.permission_ids: dict[str, Any] = {}

    async def send(self, message: dict[str, Any]) -> None:
        if message.get("method") == "session/request_permission":
            meta = (message.get("params") or {}).get("_meta") or {}
            if REQUEST_META in meta:
                self.permission_ids[str(meta[REQUEST_META])] = message.get("id")
        await self._write(message)

    async def cancel_permission(self, request_id: str) -> None:
        """Withdraw the editor's permission dialog for our input request `request_id`."""
        rpc_id = self.permission_ids.pop(request_id, None)
        if rpc_id is not None and not self._closed:
            await self._write(
                {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": rpc_id}}
            )

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._line()
            if line is None:
                return None
            if line is OVERSIZED:
                await self._error(None, INVALID_REQUEST, f"message over {MAX_MESSAGE_BYTES} bytes")
                continue
            assert isinstance(line, bytes)
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError as exc:  # also bytes that are not UTF-8
                await self._error(None, PARSE_ERROR, "Parse error", str(exc))
                continue
            problem = _shape_problem(message)
            if problem is not None:
                rpc_id = message.get("id") if isinstance(message, dict) else None
                await self._error(rpc_id if _valid_id(rpc_id) else None, INVALID_REQUEST, problem)
                continue
            if message.get("method") == "$/cancel_request":
                continue  # a prompt is cancelled with session/cancel; nothing else runs long
            if _has_lone_surrogate(message):
                if "id" in message and "method" in message:
                    await self._error(message["id"], INVALID_PARAMS, "lone surrogate in params")
                continue
            return dict(message)

    async def close(self) -> None:
        self._closed = True

    async def _line(self) -> bytes | _Oversized | None:
        try:
            return await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as eof:
            return eof.partial or None
        except asyncio.LimitOverrunError as over:
            await self._reader.readexactly(over.consumed)
        while True:  # drop the rest of the oversized line
            try:
                await self._reader.readuntil(b"\n")
                return OVERSIZED
            except asyncio.IncompleteReadError:
                return OVERSIZED
            except asyncio.LimitOverrunError as over:
                await self._reader.readexactly(over.consumed)

    async def _error(self, rpc_id: Any, code: int, message: str, detail: str | None = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if detail is not None:
            error["data"] = {"details": detail}
        await self._write({"jsonrpc": "2.0", "id": rpc_id, "error": error})

    async def _write(self, message: dict[str, Any]) -> None:
        if self._closed:
            raise ConnectionError("the editor closed the connection")
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        async with self._lock:
            self._writer.write(data)
            await self._writer.drain()


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, int | str) and not isinstance(value, bool))


def _shape_problem(message: Any) -> str | None:
    """Why `message` is not a JSON-RPC 2.0 request, notification or response (or None)."""
    if not isinstance(message, dict):
        return "not a JSON-RPC object (batches are not supported)"
    if message.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if "id" in message and not _valid_id(message["id"]):
        return "id must be a string, an integer or null"
    if "method" in message:
        if not isinstance(message["method"], str):
            return "method must be a string"
        if not isinstance(message.get("params", {}), dict | list | None):
            return "params must be an object or an array"
        return None
    if "id" not in message:
        return "neither a request nor a response"
    if "error" in message and not isinstance(message["error"], dict):
        return "error must be an object"
    if "result" not in message and "error" not in message:
        return "a response needs a result or an error"
    return None


def _has_lone_surrogate(message: dict[str, Any]) -> bool:
    try:
        json.dumps(message, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return True
    return False
