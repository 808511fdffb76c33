"""The egress relay: this attempt's end of the egress proxy (docs/gateway.md).

A Unix socket in a private directory, made for one attempt and bound into its sandboxes
(`Sandbox.egress`); the forwarder in a sandbox connects to it. Each connection goes to the
gateway with the attempt's ticket, byte for byte: to the gateway in this process directly
(`GatewayRoute.egress`, `nua serve --role all`), else over a WebSocket to
`{gateway}/v1/gateway/egress`, binary messages each way, an empty one for the end of a
direction. The gateway decides and audits; the relay only carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType

import aiohttp

from opennua.runtime._env import GatewayRoute

log = logging.getLogger("opennua.runtime")

EGRESS_PATH = "/v1/gateway/egress"
_UNREACHABLE = (
    b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: 47\r\n"
    b"X-Opennua-Egress: gateway_unavailable\r\nConnection: close\r\n\r\n"
    b"opennua egress proxy: the gateway did not answer"
)


class EgressRelay:
    """`async with EgressRelay(route) as socket_path:` for the lifetime of an attempt."""

    def __init__(self, route: GatewayRoute) -> None:
        self._route = route
        self._dir: Path | None = None
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Path:
        self._dir = Path(tempfile.mkdtemp(prefix="nua-egress-"))  # 0700: the server's alone
        path = self._dir / "egress.sock"
        self._server = await asyncio.start_unix_server(self._connection, path)
        # The sandbox's user connects (SANDBOX_UID when the server is root); only the
        # sandbox sees the socket, bound in, past the 0700 directory.
        os.chmod(path, 0o666)
        return path

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._http is not None:
            await self._http.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Served in a task of its own, which the end of the attempt cancels: asyncio's
        # callback for this one (3.11) cannot take a cancellation.
        task = asyncio.ensure_future(self._carry(reader, writer))
        self._tasks.add(task)
        try:
            await asyncio.wait([task])
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _carry(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if self._route.egress is not None:
                await self._route.egress(self._route.ticket, reader, writer)
            else:
                await self._over_websocket(reader, writer)
        except Exception:
            log.warning("an egress connection failed", exc_info=True)

    async def _over_websocket(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if self._http is None:
            self._http = aiohttp.ClientSession()
        url = self._route.url.rstrip("/") + EGRESS_PATH
        headers = {"Authorization": f"Bearer {self._route.ticket}"}
        try:
            ws = await self._http.ws_connect(url, headers=headers, max_msg_size=0)
        except (aiohttp.ClientError, OSError):
            writer.write(_UNREACHABLE)
            with contextlib.suppress(OSError):
                await writer.drain()
            return
        async with ws:

            async def up() -> None:
                while chunk := await reader.read(65536):
                    await ws.send_bytes(chunk)
                await ws.send_bytes(b"")  # the sandbox's side ended

            sending = asyncio.ensure_future(up())
            try:
                async for message in ws:
                    if message.type != aiohttp.WSMsgType.BINARY:
                        break
                    if message.data:
                        writer.write(message.data)
                        await writer.drain()
                    elif writer.can_write_eof():
                        writer.write_eof()  # the server's side ended
            finally:
                sending.cancel()
                await asyncio.gather(sending, return_exceptions=True)
