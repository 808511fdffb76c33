"""What the store knows of files: artifacts, a session's workspace manifests, and which
blobs a workspace holds (the bytes are in `BlobStore`); records, writes and reads.

Blobs are global for storage but a workspace names one only through a reference it
holds (`workspace_blobs`): the upload of its bytes takes one (`HoldBlob`), within the
workspace's storage quota."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._actions import action_from_row
from ._errors import QuotaExceeded, WriteConflict
from ._sql import CHECKED_RECORDS, Columns, Dialect, Effects, Op, Program, Query

# -- records -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ArtifactRecord:
    artifact_id: str
    session_id: str
    name: str
    media_type: str
    size: int
    sha256: str
    created_at: float
    turn_id: str | None = None
    tool_call_id: str | None = None


#: Its text fields are checked as those of an op that carries it.
CHECKED_RECORDS.add(ArtifactRecord)
_ARTIFACT_COLS = Columns(ArtifactRecord)


# -- writes --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PutArtifact(Op):
    artifact: ArtifactRecord

    def run(self, d: Dialect, fx: Effects) -> Program[ArtifactRecord]:
        a = self.artifact
        exists = WriteConflict("artifact", a.artifact_id, "already exists")
        return (yield from _ARTIFACT_COLS.insert_new("artifacts", a, exists))


@dataclass(frozen=True, slots=True)
class HoldBlob(Op):
    """The workspace takes a reference to a blob whose bytes it uploaded (they are in the
    blob store); True if it did not hold one yet. Its quota counts the distinct blobs it
    holds: one it holds already costs nothing, one that would take it past ``quota``
    bytes is :class:`QuotaExceeded` and nothing is held. ``quota`` None: no limit."""

    workspace_id: str
    sha256: str
    size: int
    now: float
    quota: int | None = None

    def run(self, d: Dialect, fx: Effects) -> Program[bool]:
        # Two uploads into one workspace at once (PostgreSQL) must not both fit: its row
        # locked, they take turns. SQLite's one writer already serializes them.
        yield Query(f"SELECT workspace_id FROM workspaces WHERE workspace_id = ?{d.lock_row}",
                    (self.workspace_id,))  # fmt: skip
        held = yield Query(
            "SELECT 1 FROM workspace_blobs WHERE workspace_id = ? AND sha256 = ?",
            (self.workspace_id, self.sha256),
        )
        if held:
            return False
        if self.quota is not None:
            used = yield from workspace_usage(self.workspace_id)
            if used + self.size > self.quota:
                raise QuotaExceeded(self.workspace_id, used, self.quota, self.size)
        yield Query(
            "INSERT INTO workspace_blobs (workspace_id, sha256, size, created_at) "
            "VALUES (?, ?, ?, ?)",
            (self.workspace_id, self.sha256, self.size, self.now),
        )
        return True


# -- reads ---------------------------------------------------------------------------


def get_artifact(artifact_id: str) -> Program[ArtifactRecord]:
    rows = yield Query(
        f"SELECT {_ARTIFACT_COLS} FROM artifacts WHERE artifact_id = ?", (artifact_id,)
    )
    return _ARTIFACT_COLS.one(rows, "artifact", artifact_id)


def list_artifacts(session_id: str) -> Program[list[ArtifactRecord]]:
    rows = yield Query(
        f"SELECT {_ARTIFACT_COLS} FROM artifacts WHERE session_id = ? "
        "ORDER BY created_at, artifact_id",
        (session_id,),
    )
    return [_ARTIFACT_COLS.read(r) for r in rows]


_MANIFEST_PAGE = 20


def last_workspace_manifest(session_id: str) -> Program[str | None]:
    # Newest first: the newest turn or the one before normally has one, so the scan stops
    # within about a turn of the log's end, and decodes only the workspace actions' bodies.
    after = None
    while True:
        bound = "" if after is None else " AND seq < ?"
        rows = yield Query(
            "SELECT seq, action_id, type, body FROM actions WHERE session_id = ? AND type IN "
            f"('workspace.committed', 'workspace.restored'){bound} ORDER BY seq DESC LIMIT ?",
            (session_id, _MANIFEST_PAGE) if after is None else (session_id, after, _MANIFEST_PAGE),
        )
        for seq, action_id, action_type, body in rows:
            manifest = action_from_row(session_id, action_id, action_type, body)["data"].get(
                "manifest"
            )
            if manifest is not None:
                return str(manifest)
            after = seq
        if len(rows) < _MANIFEST_PAGE:
            return None


#: sha256s per `IN (…)` list: far below SQLite's bound on parameters.
_IN_CHUNK = 500


def held_blobs(workspace_id: str, sha256s: Sequence[str]) -> Program[dict[str, int]]:
    """Which of ``sha256s`` the workspace holds a reference to, with their sizes."""
    out: dict[str, int] = {}
    wanted = sorted(set(sha256s))
    for start in range(0, len(wanted), _IN_CHUNK):
        chunk = wanted[start : start + _IN_CHUNK]
        rows = yield Query(
            f"SELECT sha256, size FROM workspace_blobs WHERE workspace_id = ? "
            f"AND sha256 IN ({','.join('?' * len(chunk))})",
            [workspace_id, *chunk],
        )
        out.update({r[0]: int(r[1]) for r in rows})
    return out


def workspace_usage(workspace_id: str) -> Program[int]:
    """The bytes of the distinct blobs the workspace holds (what its quota counts)."""
    rows = yield Query(
        "SELECT COALESCE(SUM(size), 0) FROM workspace_blobs WHERE workspace_id = ?",
        (workspace_id,),
    )
    return int(rows[0][0])


def all_held_blobs() -> Program[set[str]]:
    """Every blob some workspace holds (the collector keeps them)."""
    rows = yield Query("SELECT DISTINCT sha256 FROM workspace_blobs")
    return {r[0] for r in rows}
