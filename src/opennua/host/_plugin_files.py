"""Plugin file contents: their upload, and which ones a workspace may name
(docs/plugins.md "Publishing", docs/store.md "Blobs").

Blobs are global for storage but scoped for access. A workspace names a blob by its
sha256 only when it uploaded those bytes itself — the upload takes a reference for it
(`Store.hold_blob`), counted against the workspace's storage quota — or when a version
it sees lists it (the built-in plugin, its own versions). So `POST
/v1/plugin-files/missing` never tells whether *another* workspace holds some content, and
a publish cannot list another workspace's manifest, file or artifact by its hash and read
it back as a skill resource.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from opennua.plugins import MAX_FILE_BYTES
from opennua.store import BlobRef, FileStore, QuotaExceeded, RegistryStore

from ._refused import Refused


class PluginFileStore(FileStore, RegistryStore, Protocol):
    """Where plugin files go: the blobs a workspace holds, and the versions naming them."""


if TYPE_CHECKING:
    from ._registry import Scope

#: What a workspace may hold in uploaded plugin files (`nua serve --workspace-quota`).
DEFAULT_WORKSPACE_QUOTA = 5 * 1024**3


class PluginFiles:
    def __init__(
        self,
        store: PluginFileStore,
        *,
        clock: Callable[[], float] = time.time,
        workspace_quota: int | None = DEFAULT_WORKSPACE_QUOTA,
    ) -> None:
        self.store = store
        self._clock = clock
        #: Bytes of uploaded plugin files a workspace may hold; None: no limit.
        self.workspace_quota = workspace_quota

    async def missing(self, sha256s: Sequence[str], scope: Scope | None = None) -> list[str]:
        """The file contents of a coming publish that still need uploading: in a scope,
        all but those it may name already."""
        return sorted(set(sha256s) - (await self.reachable(scope, set(sha256s))).keys())

    async def reachable(self, scope: Scope | None, sha256s: set[str]) -> dict[str, int | None]:
        """Which of `sha256s` the scope may name and whose bytes are there, with their
        sizes: the blobs its workspace uploaded, and the files of versions it sees. The
        server (no scope) names any blob there is; its sizes are checked when read."""
        if scope is None:
            return {s: None for s in sha256s if await self.store.blobs.exists(s)}
        sizes: dict[str, int | None] = {}
        sizes.update(await self.store.held_blobs(scope.workspace_id, list(sha256s)))
        rest = sha256s - sizes.keys()
        if rest:
            for v in await self.store.workspace_versions(scope.workspace_id):
                if scope.sees(v):
                    sizes.update({f.sha256: f.size for f in v.files if f.sha256 in rest})
        return {s: n for s, n in sizes.items() if await self.store.blobs.exists(s)}

    async def upload(self, chunks: AsyncIterable[bytes], scope: Scope | None = None) -> BlobRef:
        """Store one plugin file's bytes as they arrive (at most MAX_FILE_BYTES, counted
        on the way), and let the scope's workspace name them: within its quota."""
        parts: list[bytes] = []
        size, digest = 0, hashlib.sha256()
        async for chunk in chunks:
            size += len(chunk)
            if size > MAX_FILE_BYTES:
                raise Refused(
                    "payload_too_large", f"a plugin file is at most {MAX_FILE_BYTES} bytes"
                )
            digest.update(chunk)
            parts.append(chunk)
        quota = self.workspace_quota
        if scope is not None and quota is not None:
            # Checked before the bytes are stored; a blob the workspace holds costs nothing.
            held = await self.store.held_blobs(scope.workspace_id, [digest.hexdigest()])
            used = await self.store.workspace_usage(scope.workspace_id)
            if not held and used + size > quota:
                raise _over_quota(QuotaExceeded(scope.workspace_id, used, quota, size))
        ref = await self.store.blobs.put_stream(parts)
        if scope is not None:
            try:
                await self.store.hold_blob(
                    scope.workspace_id, ref.sha256, ref.size, self._clock(), quota=quota
                )
            except QuotaExceeded as exc:  # another upload took the room meanwhile
                raise _over_quota(exc) from exc
        return ref


def _over_quota(exc: QuotaExceeded) -> Refused:
    return Refused(
        "workspace_quota_exceeded",
        f"this workspace holds {exc.used} bytes of plugin files; {exc.size} more would pass "
        f"its quota of {exc.quota} bytes",
        used=exc.used,
        quota=exc.quota,
        size=exc.size,
    )
