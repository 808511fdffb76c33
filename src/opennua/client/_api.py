"""The base of the client's API groups: each group (people, automation) asks `request`
for one HTTP exchange and names the shape of its answer."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

__all__ = ["Api", "segment", "where"]


def segment(value: str) -> str:
    """An id as one URL path segment: a `/`, `?`, space or control character in an id a
    user typed can neither break the URL nor reach another route (the server says 404)."""
    quoted = quote(value, safe="")
    # httpx resolves "." and ".." segments away (RFC 3986), which would change the route.
    return quoted.replace(".", "%2E") if set(value) <= {"."} else quoted


def where(workspace_id: str | None) -> dict[str, str]:
    """The `workspace_id` query of a call scoped to a workspace (none: your first)."""
    return {} if workspace_id is None else {"workspace_id": workspace_id}


class Api:
    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; the Client sends it (transport and HTTP errors typed)."""
        raise NotImplementedError

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return (await self.request(method, path, **kwargs)).json()

    async def _get(self, path: str, **params: Any) -> Any:
        return await self._json("GET", path, params=params or None)
