"""Retrying an artifact whose upload failed: the Host's side of the artifact state.

`publish_artifact` registers an artifact even when the blob store refused its bytes
(`artifact.published {state: "failed"}`), so the turn completes and every client shows
the failure. Its content is not lost: the call's input, in the session log, holds it. A
retry appends `artifact.updated {state: "pending"}`, uploads those bytes (checked against
the sha256 the artifact was registered with), then in one unit records the artifact
(downloadable from then on) and appends `published` — or appends `failed` again.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from opennua.protocol import envelope, timestamp
from opennua.protocol.state import Artifact, SessionState
from opennua.store import ArtifactRecord, FileStore, LogStore, NotFound, Unavailable

from ._inputs import Clock, Ids
from ._states import SessionStates


class RetryStore(LogStore, FileStore, Protocol):
    """What retrying an artifact writes to: the session's log and the blobs."""


class ArtifactRetries:
    def __init__(
        self,
        store: RetryStore,
        states: SessionStates,
        *,
        clock: Clock,
        ids: Ids,
        committed: Callable[[str, int], Awaitable[None]],
    ) -> None:
        self._store = store
        self._states = states
        self._clock = clock
        self._ids = ids
        self._committed = committed
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    async def retry(self, session_id: str, artifact_id: str) -> Artifact:
        """Upload a `failed` (or stuck `pending`) artifact again; return its new state.

        NotFound for an artifact this session did not publish. A published one is returned
        as it is (a retry that raced another is harmless).
        """
        lock = self._locks.get(session_id)
        if lock is None:
            lock = self._locks[session_id] = asyncio.Lock()
        async with lock:
            state = await self._states.fold(session_id)
            artifact = state["artifacts"].get(artifact_id)
            if artifact is None:
                raise NotFound("artifact", artifact_id)
            if artifact["state"] == "published":
                return artifact
            data = _content(state, artifact)
            if data is None or hashlib.sha256(data).hexdigest() != artifact["sha256"]:
                await self._update(
                    session_id, artifact, "failed", ("content_lost", "its content is not kept")
                )
                return await self._current(session_id, artifact_id)
            await self._update(session_id, artifact, "pending", None)
            try:
                await self._store.blobs.put(data)
            except Unavailable as exc:
                await self._update(
                    session_id,
                    artifact,
                    "failed",
                    ("blobs_unavailable", f"the blob store does not answer: {exc.detail}"),
                )
                return await self._current(session_id, artifact_id)
            now = self._clock()
            async with self._store.transaction() as tx:
                tx.put_artifact(
                    ArtifactRecord(
                        artifact_id=artifact_id,
                        session_id=session_id,
                        name=artifact["name"],
                        media_type=artifact["media_type"],
                        size=artifact["size"],
                        sha256=artifact["sha256"],
                        created_at=now,
                        turn_id=artifact["turn_id"],
                        tool_call_id=artifact["tool_call_id"],
                    )
                )
                tx.append(session_id, [self._action(session_id, artifact, "published", None)])
            await self._committed(session_id, 1)
            return await self._current(session_id, artifact_id)

    async def _current(self, session_id: str, artifact_id: str) -> Artifact:
        return (await self._states.fold(session_id))["artifacts"][artifact_id]

    async def _update(
        self, session_id: str, artifact: Artifact, to: str, error: tuple[str, str] | None
    ) -> None:
        await self._store.append(session_id, [self._action(session_id, artifact, to, error)])
        await self._committed(session_id, 1)

    def _action(
        self, session_id: str, artifact: Artifact, to: str, error: tuple[str, str] | None
    ) -> dict[str, Any]:
        data: dict[str, Any] = {"artifact_id": artifact["artifact_id"], "state": to}
        if error is not None:
            data["error"] = {"code": error[0], "message": error[1][:2000]}
        return envelope(
            session_id,
            self._ids("action"),
            "artifact.updated",
            timestamp(self._clock()),
            data,
            turn_id=artifact["turn_id"],
        )


def _content(state: SessionState, artifact: Artifact) -> bytes | None:
    """The bytes `publish_artifact` was called with: its input in the log."""
    call_id = artifact["tool_call_id"]
    for turn in state["turns"]:
        if turn["turn_id"] != artifact["turn_id"] or call_id not in turn["tool_calls"]:
            continue
        args = turn["tool_calls"][call_id]["input"]
        content = args.get("content") if isinstance(args, dict) else None
        if isinstance(content, str):
            return content.encode()
    return None
