"""A Server-Sent Events parser over lines (the WHATWG event-stream rules this API uses)."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True)
class SseEvent:
    event: str
    data: str
    id: str | None


async def parse_sse(lines: AsyncIterable[str]) -> AsyncIterator[SseEvent]:
    """Events from `lines` (without line terminators). Comments (`: heartbeat`) are skipped,
    multi-line `data` is joined with newlines, and a blank line dispatches the event."""
    event, last_id = "", None
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r")
        if not line:
            if data:
                yield SseEvent(event or "message", "\n".join(data), last_id)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
        elif name == "id":
            last_id = value
