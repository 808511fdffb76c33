"""gzip for a live stream (docs/server.md, "Live streams"): one gzip member for the whole
response, flushed at every write, so each batch of events can be decoded the moment it
arrives and none waits in the compressor for the next. Every event stream we serve (a
session's SSE, AG-UI runs, A2A's `SendStreamingMessage`) sends through `gzip_send`.

Starlette's GZipMiddleware leaves `text/event-stream` alone for exactly that reason: it
flushes only when the response ends. Every SSE client in use (browsers' EventSource,
httpx, undici's fetch) asks for gzip and inflates as bytes arrive.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from starlette.types import Message, Scope, Send

#: A 4 KiB window and memLevel 5: ~40 KiB of compressor state per open stream instead of
#: zlib's default ~260 KiB. An action repeats the ids of the few before it (its session,
#: turn and run), which lie well inside 4 KiB; the default window saved 15 % more bytes
#: on the demo turn, for six times the memory of every subscriber.
WINDOW_BITS = 12
MEMORY_LEVEL = 5
GZIP_HEADER = 16  # added to the window bits: write a gzip member, not a zlib stream


#: Every event stream says so, compressed or not: what it sends depends on the request's
#: Accept-Encoding.
VARY = (b"vary", b"Accept-Encoding")


def gzip_send(scope: Scope, send: Send) -> Send:
    """`send` for a streamed response: its start gains `Vary: Accept-Encoding` and, when the
    request accepts gzip, `Content-Encoding: gzip`; then every body message is compressed
    and flushed, the last one closing the member."""
    stream = GzipStream() if accepts_gzip(scope["headers"]) else None

    async def encoded(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [*message.get("headers", ()), VARY]
            if stream is not None:
                headers.append((b"content-encoding", b"gzip"))
            message = {**message, "headers": headers}
        elif stream is not None and message["type"] == "http.response.body":
            body = message.get("body", b"")
            more = message.get("more_body", False)
            message = {**message, "body": stream.write(body) if more else stream.end(body)}
        await send(message)

    return encoded


def accepts_gzip(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether a request's `Accept-Encoding` allows gzip (RFC 9110 §12.5.3): named, or
    covered by `*`, with a weight above 0."""
    allowed: dict[str, bool] = {}
    for name, value in headers:
        if name != b"accept-encoding":
            continue
        for item in value.decode("latin-1").split(","):
            coding, _, params = item.strip().lower().partition(";")
            allowed[coding.strip()] = _weight(params) > 0
    return allowed.get("gzip", allowed.get("x-gzip", allowed.get("*", False)))


def _weight(params: str) -> float:
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.strip() == "q":
            try:
                return float(value)
            except ValueError:
                return 0.0  # a weight that is not a number allows nothing
    return 1.0


class GzipStream:
    """Bytes in, one gzip member out: everything a `write` returns decodes on arrival
    (Z_SYNC_FLUSH ends it on a byte boundary); `end` closes the member."""

    def __init__(self) -> None:
        self._zlib = zlib.compressobj(
            zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, GZIP_HEADER + WINDOW_BITS, MEMORY_LEVEL
        )

    def write(self, data: bytes) -> bytes:
        return self._zlib.compress(data) + self._zlib.flush(zlib.Z_SYNC_FLUSH)

    def end(self, data: bytes = b"") -> bytes:
        return self._zlib.compress(data) + self._zlib.flush(zlib.Z_FINISH)
