"""`web_fetch` (Claude Code's `WebFetch`): a GET through the egress proxy, never direct.

The attempt's egress relay (`Sandbox.egress`, a Unix socket speaking the HTTP proxy
protocol, `_egress.py`) carries the request to the gateway, which allows only what the
deployment's egress list names and audits it like any sandboxed connection. Without a
relay (the deployment lists no egress) the tool refuses, saying so.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpcore
from httpcore import AsyncNetworkBackend, AsyncNetworkStream
from httpcore._backends.auto import AutoBackend

from opennua.runtime._errors import ToolError

MAX_BODY = 256 * 1024
MAX_REDIRECTS = 5
TIMEOUT = 30.0
#: The proxy's address is the socket; this name only fills the request line's host.
_PROXY = "http://egress.opennua.invalid:3128/"
_TEXTUAL = ("text/", "application/json", "application/xml", "application/javascript")


async def fetch(egress: Path | None, url: str) -> str:
    """The body of `url` as text (bounded), following redirects; a `ToolError` saying why
    not (no egress, refused by the proxy, not text)."""
    if egress is None:
        raise ToolError(
            "web_fetch is not available: this deployment allows no network (an admin can "
            "allow hosts with `nua deploy --egress HOST:443`)",
            code="egress_denied",
        )
    timeouts = {"connect": TIMEOUT, "read": TIMEOUT, "write": TIMEOUT, "pool": TIMEOUT}
    backend = _ToRelay(egress)
    async with httpcore.AsyncHTTPProxy(proxy_url=_PROXY, network_backend=backend) as pool:
        for _ in range(MAX_REDIRECTS + 1):
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ToolError(f"{url[:200]!r} is not an http(s) URL")
            where = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
            try:
                async with pool.stream(
                    "GET",
                    url,
                    headers={"Accept": "text/*, application/json;q=0.9, */*;q=0.1"},
                    extensions={"timeout": timeouts},
                ) as response:
                    headers = {k.decode().lower(): v.decode() for k, v in response.headers}
                    refused = headers.get("x-opennua-egress")
                    if refused:
                        raise _refused(where, refused)
                    if response.status in (301, 302, 303, 307, 308) and "location" in headers:
                        url = urljoin(url, headers["location"])
                        continue
                    body = await _read(response)
            except httpcore.ProxyError as exc:  # a CONNECT the proxy answered with a refusal
                raise _refused(where, str(exc)) from None
            except (httpcore.TimeoutException, httpcore.NetworkError) as exc:
                raise ToolError(f"fetching {url[:200]}: {type(exc).__name__} {exc}") from None
            except httpcore.ProtocolError as exc:
                raise ToolError(f"fetching {url[:200]}: {exc}") from None
            return _shown(url, response.status, headers, body)
    raise ToolError(f"more than {MAX_REDIRECTS} redirects from {url[:200]}")


class _ToRelay(AsyncNetworkBackend):
    """Every connection to "the proxy" is one to the relay's Unix socket (httpcore's own
    `uds` is not used for proxy connections)."""

    def __init__(self, socket: Path) -> None:
        self._socket = str(socket)
        self._backend = AutoBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[object] | None = None,
    ) -> AsyncNetworkStream:
        return await self._backend.connect_unix_socket(self._socket, timeout=timeout)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[object] | None = None,
    ) -> AsyncNetworkStream:
        return await self._backend.connect_unix_socket(self._socket, timeout=timeout)

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


def _refused(where: str, why: str) -> ToolError:
    return ToolError(
        f"the egress proxy refused {where} ({why}): the deployment's egress list does not "
        f"allow it (an admin can add it: `nua deploy --egress {where}`)",
        code="egress_denied",
    )


async def _read(response: httpcore.Response) -> bytes:
    chunks, size = [], 0
    async for chunk in response.aiter_stream():
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BODY:
            break
    return b"".join(chunks)


def _shown(url: str, status: int, headers: dict[str, str], body: bytes) -> str:
    kind = headers.get("content-type", "")
    if kind and not kind.startswith(_TEXTUAL) and "+json" not in kind and "+xml" not in kind:
        raise ToolError(f"{url[:200]} is {kind}, not text ({len(body)} bytes)")
    text = body[:MAX_BODY].decode(errors="replace")
    more = "\n[truncated]" if len(body) > MAX_BODY else ""
    head = f"HTTP {status} {url}" + (f" ({kind})" if kind else "")
    if status >= 400:
        raise ToolError(f"{head}\n{text[:2000]}")
    return f"{head}\n\n{text}{more}"
