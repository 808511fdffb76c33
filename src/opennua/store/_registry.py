"""The plugin registry's records, write programs and reads: published plugin versions,
release-channel moves and deployments (docs/plugins.md, "Registry").

A published version is one row written once; its files are blobs named by sha256, so
publishing checks they are all in the blob store *before* the row is written: a version is
either fully readable or absent. A channel is its list of moves; its target is derived.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ._errors import NotFound, WriteConflict
from ._json import dumps, loads
from ._sql import Columns, Dialect, Effects, Op, Program, Query, Row

MoveKind = Literal["release", "rollback"]
Visibility = Literal["workspace", "private"]


@dataclass(frozen=True, slots=True)
class PluginFile:
    """One file of a published version: its path inside the plugin and its blob."""

    path: str
    sha256: str
    size: int
    executable: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PluginVersion:
    name: str
    version: str
    digest: str
    description: str = ""
    files: tuple[PluginFile, ...] = ()
    published_at: float = 0.0
    #: Where it was published and by whom; None: server-wide (the built-in plugin).
    workspace_id: str | None = None
    publisher_id: str | None = None
    #: `workspace`: every reader of the workspace sees it; `private`: its publisher only.
    visibility: Visibility = "workspace"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelMove:
    name: str
    channel: str
    seq: int
    version: str
    kind: MoveKind
    moved_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class DeploymentRecord:
    """A validated deployment configuration, addressed by its digest (``spec`` is as saved)."""

    name: str
    digest: str
    spec: dict[str, Any]
    created_at: float
    #: The workspace it was saved in; None: server-wide (the built-in `default`).
    workspace_id: str | None = None


def channel_target(moves: list[ChannelMove]) -> str | None:
    """The version a channel points at after ``moves`` (in seq order)."""
    stack = _in_force(moves)
    return stack[-1] if stack else None


def rollback_target(moves: list[ChannelMove]) -> str | None:
    """Where a rollback would move the channel: the target before the current one."""
    stack = _in_force(moves)
    return stack[-2] if len(stack) >= 2 else None


def _in_force(moves: list[ChannelMove]) -> list[str]:
    # A release pushes its version; a rollback pops the newest release still in force,
    # so two rollbacks after three releases land on the first (not back and forth).
    stack: list[str] = []
    for move in moves:
        if move.kind == "release":
            stack.append(move.version)
        else:
            stack.pop()
    return stack


# -- row mapping ---------------------------------------------------------------------------


def _files(text: str) -> tuple[PluginFile, ...]:
    return tuple(PluginFile(f[0], f[1], f[2], bool(f[3])) for f in loads(text))


_VERSION_COLS = Columns(PluginVersion, decode={"files": _files})
_CONFIG_COLS = Columns(DeploymentRecord, decode={"spec": loads})
_MOVE_COLS = Columns(ChannelMove)


def _moves(name: str, channel: str) -> Program[list[ChannelMove]]:
    rows = yield Query(
        f"SELECT {_MOVE_COLS} FROM channel_moves WHERE name = ? AND channel = ? ORDER BY seq",
        (name, channel),
    )
    return [_MOVE_COLS.read(r) for r in rows]


# -- writes --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PublishVersion(Op):
    """Insert a version unless one with its name and version exists: the same digest is the
    same publish (returned, ``False``); another digest is ``WriteConflict``. A name belongs
    to where its first version was published: another workspace, another visibility or (a
    private plugin) another publisher is ``WriteConflict`` on the name."""

    version: PluginVersion

    def run(self, d: Dialect, fx: Effects) -> Program[tuple[PluginVersion, bool]]:
        v = self.version
        owner = yield Query(
            "SELECT workspace_id, publisher_id, visibility FROM plugin_versions "
            "WHERE name = ? LIMIT 1",
            (v.name,),
        )
        if owner and not _same_owner(owner[0], v):
            raise WriteConflict("plugin name", v.name, "is taken: it is published elsewhere")
        files = [[f.path, f.sha256, f.size, int(f.executable)] for f in v.files]
        rows = yield Query(
            f"INSERT INTO plugin_versions ({_VERSION_COLS}) VALUES ({_VERSION_COLS.marks}) "
            "ON CONFLICT (name, version) DO NOTHING RETURNING name",
            _VERSION_COLS.values(v, files=dumps(files, "plugin files")),
        )
        if rows:
            return v, True
        existing = yield from get_version(v.name, v.version)
        if existing.digest != v.digest:
            raise WriteConflict(
                "plugin version",
                f"{v.name}@{v.version}",
                f"already published with digest {existing.digest[:12]}; publish a new version",
            )
        return existing, False


def _same_owner(row: Row, v: PluginVersion) -> bool:
    workspace_id, publisher_id, visibility = row
    if (workspace_id, visibility) != (v.workspace_id, v.visibility):
        return False
    return bool(visibility == "workspace" or publisher_id == v.publisher_id)


@dataclass(frozen=True, slots=True)
class MoveChannel(Op):
    """Append one move to a channel: a release of ``version`` (which must be published),
    or a rollback (``version`` None) to the target before the current one."""

    name: str
    channel: str
    version: str | None
    now: float

    def run(self, d: Dialect, fx: Effects) -> Program[ChannelMove]:
        moves = yield from _moves(self.name, self.channel)
        kind: MoveKind
        if self.version is None:
            kind, target = "rollback", rollback_target(moves)
            if target is None:
                raise WriteConflict(
                    "channel", f"{self.name}:{self.channel}", "has no earlier release to go back to"
                )
        else:
            kind, target = "release", self.version
            yield from get_version(self.name, target)
        move = ChannelMove(
            name=self.name,
            channel=self.channel,
            seq=len(moves) + 1,
            version=target,
            kind=kind,
            moved_at=self.now,
        )
        # Two movers of one channel on PostgreSQL: the (name, channel, seq) key lets one win.
        yield Query(
            f"INSERT INTO channel_moves ({_MOVE_COLS}) VALUES ({_MOVE_COLS.marks})",
            _MOVE_COLS.values(move),
        )
        return move


@dataclass(frozen=True, slots=True)
class PutDeployment(Op):
    """Record a configuration (once per digest) and point its name at it."""

    deployment: DeploymentRecord

    def run(self, d: Dialect, fx: Effects) -> Program[DeploymentRecord]:
        dep = self.deployment
        current = yield Query(
            "SELECT c.workspace_id FROM deployments d JOIN deployment_configs c "
            "ON c.digest = d.digest WHERE d.name = ?",
            (dep.name,),
        )
        if current and current[0][0] != dep.workspace_id:
            raise WriteConflict("deployment name", dep.name, "is taken by another workspace")
        yield Query(
            f"INSERT INTO deployment_configs ({_CONFIG_COLS}) VALUES ({_CONFIG_COLS.marks}) "
            "ON CONFLICT (digest) DO NOTHING",
            _CONFIG_COLS.values(dep, spec=dumps(dep.spec, "deployment")),
        )
        yield Query(
            "INSERT INTO deployments (name, digest, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET digest = excluded.digest, "
            "updated_at = excluded.updated_at",
            (dep.name, dep.digest, dep.created_at),
        )
        return (yield from get_deployment_config(dep.digest))


# -- reads ---------------------------------------------------------------------------------


def workspace_versions(workspace_id: str) -> Program[list[PluginVersion]]:
    """The versions published in the workspace, and the server-wide ones (in one read:
    what a publish reaches besides what the workspace uploaded)."""
    rows = yield Query(
        f"SELECT {_VERSION_COLS} FROM plugin_versions "
        "WHERE workspace_id IS NULL OR workspace_id = ? ORDER BY name, published_at, version",
        (workspace_id,),
    )
    return [_VERSION_COLS.read(r) for r in rows]


def get_version(name: str, version: str) -> Program[PluginVersion]:
    rows = yield Query(
        f"SELECT {_VERSION_COLS} FROM plugin_versions WHERE name = ? AND version = ?",
        (name, version),
    )
    return _VERSION_COLS.one(rows, "plugin version", f"{name}@{version}")


def list_versions(name: str) -> Program[list[PluginVersion]]:
    """Oldest first, in publish order."""
    rows = yield Query(
        f"SELECT {_VERSION_COLS} FROM plugin_versions WHERE name = ? "
        "ORDER BY published_at, version",
        (name,),
    )
    if not rows:
        raise NotFound("plugin", name)
    return [_VERSION_COLS.read(r) for r in rows]


def list_plugins() -> Program[list[str]]:
    rows = yield Query("SELECT DISTINCT name FROM plugin_versions ORDER BY name")
    return [r[0] for r in rows]


def channel_history(name: str, channel: str | None) -> Program[list[ChannelMove]]:
    """Every move of ``name``'s channels (or of one), by channel then seq."""
    if channel is not None:
        return (yield from _moves(name, channel))
    rows = yield Query(
        f"SELECT {_MOVE_COLS} FROM channel_moves WHERE name = ? ORDER BY channel, seq", (name,)
    )
    return [_MOVE_COLS.read(r) for r in rows]


def resolve_channel(name: str, channel: str) -> Program[str]:
    moves = yield from _moves(name, channel)
    target = channel_target(moves)
    if target is None:
        raise NotFound("channel", f"{name}:{channel}")
    return target


def get_deployment(name: str) -> Program[DeploymentRecord]:
    rows = yield Query(
        f"SELECT {_CONFIG_COLS.of('c')} FROM deployments d "
        "JOIN deployment_configs c ON c.digest = d.digest WHERE d.name = ?",
        (name,),
    )
    return _CONFIG_COLS.one(rows, "deployment", name)


def get_deployment_config(digest: str) -> Program[DeploymentRecord]:
    rows = yield Query(
        f"SELECT {_CONFIG_COLS} FROM deployment_configs WHERE digest = ?",
        (digest,),
    )
    return _CONFIG_COLS.one(rows, "deployment digest", digest)


def list_deployments() -> Program[list[DeploymentRecord]]:
    rows = yield Query(
        f"SELECT {_CONFIG_COLS.of('c')} FROM deployments d "
        "JOIN deployment_configs c ON c.digest = d.digest ORDER BY d.name"
    )
    return [_CONFIG_COLS.read(r) for r in rows]
