"""The few Matrix client-server API calls the bridge makes, over httpx.

Hand-written rather than a full SDK because the bridge must choose every transaction id
itself (the delivery id) and classify every failure: a transport error, 5xx or 429 is
worth retrying; another 4xx is final.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

_API = "/_matrix/client/v3"


class MatrixError(Exception):
    """A failed call: `transient` ones are retried, others give up at once."""

    def __init__(self, code: str, message: str, *, transient: bool) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.transient = transient


def _q(value: str) -> str:
    return quote(value, safe="")


class Matrix:
    def __init__(self, homeserver: str, token: str, *, timeout: float = 20.0) -> None:
        self.homeserver = homeserver.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.homeserver,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            reason = f"{type(exc).__name__}: {exc}"
            raise MatrixError("unreachable", reason, transient=True) from exc
        if response.is_success:
            body: dict[str, Any] = response.json()
            return body
        try:
            problem = response.json()
        except ValueError:
            problem = {}
        code = str(problem.get("errcode") or f"http_{response.status_code}")
        message = str(problem.get("error") or response.reason_phrase)
        transient = response.status_code >= 500 or response.status_code == 429
        raise MatrixError(code, message, transient=transient)

    async def whoami(self) -> str:
        return str((await self._call("GET", f"{_API}/account/whoami"))["user_id"])

    async def sync(self, since: str | None, timeout_ms: int) -> dict[str, Any]:
        params: dict[str, Any] = {"timeout": timeout_ms}
        if since is not None:
            params["since"] = since
        else:
            # The first sync only learns where "now" is: history from before the bridge
            # started is not a command to it.
            params["filter"] = '{"room":{"timeline":{"limit":0}}}'
        timeout = httpx.Timeout(20.0 + timeout_ms / 1000)
        return await self._call("GET", f"{_API}/sync", params=params, timeout=timeout)

    async def join(self, room_id: str) -> None:
        await self._call("POST", f"{_API}/rooms/{_q(room_id)}/join", json={})

    async def send(self, room_id: str, event_type: str, txn_id: str, content: Any) -> str:
        """PUT an event with the caller's transaction id; the same id is the same event."""
        path = f"{_API}/rooms/{_q(room_id)}/send/{_q(event_type)}/{_q(txn_id)}"
        return str((await self._call("PUT", path, json=content))["event_id"])

    async def event(self, room_id: str, event_id: str) -> dict[str, Any]:
        """One event of a room as this device sees it: its own events carry
        `unsigned.transaction_id`."""
        return await self._call("GET", f"{_API}/rooms/{_q(room_id)}/event/{_q(event_id)}")

    async def upload(self, data: bytes, filename: str, content_type: str) -> str:
        """Upload media; returns its `mxc://` URI."""
        body = await self._call(
            "POST",
            "/_matrix/media/v3/upload",
            params={"filename": filename},
            content=data,
            headers={"Content-Type": content_type},
        )
        return str(body["content_uri"])
