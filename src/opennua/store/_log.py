"""The client-visible log: sessions, their action log, snapshots and idempotency records;
their records, write programs and reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from ._actions import EncodedAction, action_from_row, check_session
from ._errors import InvalidInput, NotFound, StoreError, WriteConflict
from ._json import dumps, loads
from ._sql import CHECKED_RECORDS, Columns, Dialect, Effects, Op, Program, Query, Where

T = TypeVar("T")


# -- records -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRecord:
    session_id: str
    created_at: float
    workspace_id: str | None = None
    principal_id: str | None = None
    title: str | None = None
    plugin_digest: str | None = None
    deployment_digest: str | None = None
    metadata: dict[str, Any] | None = None
    last_seq: int = 0
    #: The execution snapshot beside the two digests: ``name@version``, the deployment's
    #: name, the model, and the snapshot's own digest.
    plugin: str | None = None
    deployment: str | None = None
    model: str | None = None
    snapshot_digest: str | None = None


SessionListStatus = Literal["idle", "running", "requires_action"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSummary:
    """A session as a list shows it: its row plus what its executions say now."""

    session: SessionRecord
    status: SessionListStatus
    open_input_requests: int
    last_activity_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionFilter:
    """Which sessions a list shows (every field optional; all given ones must hold).

    ``status`` is the list's status (as the state says it); ``needs_input`` alone asks
    whether an input request is open; ``since``/``until`` bound the creation time (unix
    seconds, ``until`` exclusive); ``title`` is a case-insensitive substring."""

    workspace_id: str | None = None
    status: SessionListStatus | None = None
    deployment: str | None = None
    principal_id: str | None = None
    needs_input: bool | None = None
    since: float | None = None
    until: float | None = None
    title: str | None = None


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    #: Pass back as ``cursor`` for the next (older) page; None when this was the last one.
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Snapshot:
    seq: int
    state_json: str


@dataclass(frozen=True, slots=True)
class New:
    """No live record had this key: the caller owns the request now."""


@dataclass(frozen=True, slots=True)
class InFlight:
    """The first request with this key has not completed yet."""


@dataclass(frozen=True, slots=True)
class Replay:
    """The key completed before: return the stored response."""

    response: Any


@dataclass(frozen=True, slots=True)
class Mismatch:
    """The key was used with a different request body."""


IdempotencyOutcome = New | InFlight | Replay | Mismatch


#: Its text fields are checked as those of an op that carries it.
CHECKED_RECORDS.add(SessionRecord)


# -- row mapping ---------------------------------------------------------------------


SESSION_COLS = Columns(SessionRecord, decode={"metadata": loads})


# -- writes --------------------------------------------------------------------------


#: How long a completed key replays its response.
DEFAULT_IDEMPOTENCY_TTL = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Append(Op):
    """Append to a session: a journal op (``_executions.JOURNAL_OPS``), which each backend
    defines once (``Dialect.append``/``Dialect.journal``)."""

    session_id: str
    actions: tuple[EncodedAction, ...]


def append_to_request_session(
    d: Dialect, session_id: str, actions: tuple[EncodedAction, ...], fx: Effects
) -> Program[list[int]]:
    """Append actions encoded before their session was known (an input request's); their
    seqs."""
    if not actions:
        return []
    check_session(session_id, actions)
    (result,) = yield from d.append([(session_id, actions)], fx)
    if isinstance(result, StoreError):
        raise result
    return result


@dataclass(frozen=True, slots=True)
class InsertSession(Op):
    session: SessionRecord

    def run(self, d: Dialect, fx: Effects) -> Program[SessionRecord]:
        s = self.session
        rows = yield Query(
            f"INSERT INTO sessions ({SESSION_COLS}) VALUES ({SESSION_COLS.marks}) "
            "ON CONFLICT (session_id) DO NOTHING RETURNING session_id",
            SESSION_COLS.values(
                s,
                metadata=None if s.metadata is None else dumps(s.metadata, "session metadata"),
                last_seq=0,
            ),
        )
        if not rows:
            raise WriteConflict("session", s.session_id, "already exists")
        return s


@dataclass(frozen=True, slots=True)
class UpdateSessionTitle(Op):
    session_id: str
    title: str | None

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        rows = yield Query(
            "UPDATE sessions SET title = ? WHERE session_id = ? RETURNING session_id",
            (self.title, self.session_id),
        )
        if not rows:
            raise NotFound("session", self.session_id)


@dataclass(frozen=True, slots=True)
class PutSnapshot(Op):
    session_id: str
    seq: int
    state_json: str

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        # Only the newest snapshot matters; an older one arriving late must not win.
        yield Query(
            "INSERT INTO snapshots (session_id, seq, state) VALUES (?, ?, ?) "
            "ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, state = excluded.state "
            "WHERE excluded.seq > snapshots.seq",
            (self.session_id, self.seq, self.state_json),
        )


@dataclass(frozen=True, slots=True)
class BeginIdempotency(Op):
    """Claim a key ahead of the work, held ``in_flight`` for its whole ttl (a single-use
    nonce: a download link). A request whose work writes a unit claims its key in that
    unit instead (:class:`ClaimIdempotency`)."""

    scope: str
    key: str
    request_hash: str
    now: float
    ttl: float

    def run(self, d: Dialect, fx: Effects) -> Program[New | InFlight | Replay | Mismatch]:
        # One statement claims the key when it is free or expired; on PostgreSQL a
        # concurrent claimer waits on the unique index and then sees it taken.
        lease = self.ttl
        rows = yield Query(
            "INSERT INTO idempotency (scope, idem_key, request_hash, status, response, created_at, "
            "expires_at) VALUES (?, ?, ?, 'in_flight', NULL, ?, ?) "
            "ON CONFLICT (scope, idem_key) DO UPDATE SET request_hash = excluded.request_hash, "
            "status = 'in_flight', response = NULL, created_at = excluded.created_at, "
            "expires_at = excluded.expires_at WHERE idempotency.expires_at <= ? "
            "RETURNING scope",
            (self.scope, self.key, self.request_hash, self.now, self.now + lease, self.now),
        )
        if rows:
            return New()
        rows = yield Query(
            "SELECT request_hash, status, response FROM idempotency "
            "WHERE scope = ? AND idem_key = ?",
            (self.scope, self.key),
        )
        request_hash, status, response = rows[0]
        if request_hash != self.request_hash:
            return Mismatch()
        if status == "completed":
            return Replay(loads(response))
        return InFlight()


@dataclass(frozen=True, slots=True)
class ClaimIdempotency(Op):
    """Take a key, completed with its response, in the unit that does the key's work: a
    unit whose key another request holds (live: completed or in flight) writes nothing
    and raises :class:`WriteConflict`, so of two requests with one key one unit commits.
    There is no claim before the work: a Host that dies mid-request leaves no key held."""

    scope: str
    key: str
    request_hash: str
    now: float
    response: Any
    ttl: float = DEFAULT_IDEMPOTENCY_TTL

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        # On PostgreSQL a concurrent claimer waits on the unique index, then finds the
        # row live and takes nothing.
        rows = yield Query(
            "INSERT INTO idempotency (scope, idem_key, request_hash, status, response, created_at, "
            "expires_at) VALUES (?, ?, ?, 'completed', ?, ?, ?) "
            "ON CONFLICT (scope, idem_key) DO UPDATE SET request_hash = excluded.request_hash, "
            "status = 'completed', response = excluded.response, "
            "created_at = excluded.created_at, expires_at = excluded.expires_at "
            "WHERE idempotency.expires_at <= ? RETURNING scope",
            (
                self.scope,
                self.key,
                self.request_hash,
                dumps(self.response, "an idempotency response"),
                self.now,
                self.now + self.ttl,
                self.now,
            ),
        )
        if not rows:
            raise WriteConflict(
                "idempotency record", f"{self.scope}/{self.key}", "is held by another request"
            )


# -- reads ---------------------------------------------------------------------------


def get_session(session_id: str) -> Program[SessionRecord]:
    rows = yield Query(f"SELECT {SESSION_COLS} FROM sessions WHERE session_id = ?", (session_id,))
    return SESSION_COLS.one(rows, "session", session_id)


#: What a list shows beside the session row, computed per row from indexed tables
#: (executions and input requests by session), never from the session's log or state.
_SUMMARY_COLS = (
    "(SELECT COUNT(*) FROM input_requests i WHERE i.session_id = s.session_id "
    "AND i.status = 'open'), "
    "(SELECT COUNT(*) FROM executions e WHERE e.session_id = s.session_id "
    "AND e.status IN ('queued', 'running', 'waiting_input')), "
    "(SELECT MAX(COALESCE(e.finished_at, e.created_at)) FROM executions e "
    "WHERE e.session_id = s.session_id)"
)


_STATUS_WHERE = {
    "requires_action": "EXISTS (SELECT 1 FROM input_requests i WHERE i.session_id = s.session_id "
    "AND i.status = 'open')",
    "running": "EXISTS (SELECT 1 FROM executions e WHERE e.session_id = s.session_id AND "
    "e.status IN ('queued', 'running', 'waiting_input')) AND NOT EXISTS (SELECT 1 FROM "
    "input_requests i WHERE i.session_id = s.session_id AND i.status = 'open')",
    "idle": "NOT EXISTS (SELECT 1 FROM executions e WHERE e.session_id = s.session_id AND "
    "e.status IN ('queued', 'running', 'waiting_input'))",
}


def list_session_summaries(
    limit: int, cursor: str | None, where_: SessionFilter | None = None
) -> Program[Page[SessionSummary]]:
    f = where_ or SessionFilter()
    where = Where()
    where.equal("s.workspace_id", f.workspace_id)
    if f.status is not None:
        if f.status not in _STATUS_WHERE:
            raise InvalidInput(f"status must be one of {', '.join(sorted(_STATUS_WHERE))}")
        where.add(_STATUS_WHERE[f.status])
    where.equal("s.deployment", f.deployment)
    where.equal("s.principal_id", f.principal_id)
    if f.needs_input is not None:
        where.add(("" if f.needs_input else "NOT ") + _STATUS_WHERE["requires_action"])
    if f.since is not None:
        where.add("s.created_at >= ?", f.since)
    if f.until is not None:
        where.add("s.created_at < ?", f.until)
    if f.title:
        # LOWER on both sides: SQLite's LIKE folds ASCII case, PostgreSQL's does not.
        where.add(
            "LOWER(COALESCE(s.title, '')) LIKE ? ESCAPE '!'", f"%{_like_escape(f.title.lower())}%"
        )
    if cursor is not None:
        # The cursor is the (created_at, session_id) of the last row served: a keyset,
        # so pages stay stable while new sessions are created.
        try:
            created, _, sid = cursor.partition("|")
            created_at = float(created)
        except ValueError as exc:
            raise InvalidInput(f"bad session cursor {cursor!r}") from exc
        where.add(
            "(s.created_at < ? OR (s.created_at = ? AND s.session_id < ?))",
            created_at,
            created_at,
            sid,
        )
    rows = yield Query(
        f"SELECT {SESSION_COLS.of('s')}, {_SUMMARY_COLS} FROM sessions s {where}"
        "ORDER BY s.created_at DESC, s.session_id DESC LIMIT ?",
        [*where.params, limit + 1],
    )
    n = len(SESSION_COLS)
    items = []
    for r in rows[:limit]:
        session = SESSION_COLS.read(r[:n])
        open_requests, active, last_turn = r[n], r[n + 1], r[n + 2]
        state: SessionListStatus = (
            "requires_action" if open_requests else "running" if active else "idle"
        )
        items.append(
            SessionSummary(
                session=session,
                status=state,
                open_input_requests=int(open_requests),
                last_activity_at=max(session.created_at, last_turn or 0.0),
            )
        )
    more = len(rows) > limit
    last = items[-1].session if items else None
    next_cursor = f"{last.created_at!r}|{last.session_id}" if more and last else None
    return Page(items, next_cursor)


def _like_escape(text: str) -> str:
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")


def read_actions(session_id: str, after: int, limit: int) -> Program[list[dict[str, Any]]]:
    rows = yield Query(
        "SELECT seq, action_id, type, body FROM actions WHERE session_id = ? AND seq > ? "
        "ORDER BY seq LIMIT ?",
        (session_id, after, limit),
    )
    return [action_from_row(session_id, r[1], r[2], r[3], r[0]) for r in rows]


def snapshots_due(session_ids: Sequence[str], every: int) -> Program[set[str]]:
    # Per session: the stored snapshot's seq, the log's end and whether a turn ended
    # since, in one read that decodes no body (the `type` column says it).
    marks = ",".join("?" * len(session_ids))
    rows = yield Query(
        "SELECT s.session_id, s.last_seq, COALESCE(n.seq, 0), EXISTS (SELECT 1 FROM "
        "actions a WHERE a.session_id = s.session_id AND a.seq > COALESCE(n.seq, 0) "
        "AND a.type = 'turn.ended') FROM sessions s "
        f"LEFT JOIN snapshots n ON n.session_id = s.session_id WHERE s.session_id IN ({marks})",
        tuple(session_ids),
    )
    return {
        session_id
        for session_id, last, stored, ended in rows
        if snapshot_due(last, stored, bool(ended), every)
    }


#: A new snapshot waits until the log since the stored one is at least 1/this of the log
#: before it.
SNAPSHOT_GROWTH = 20


def snapshot_due(last: int, stored: int, ended: bool, every: int) -> bool:
    """Whether a session whose log ends at seq `last` should replace its snapshot (stored
    at seq `stored`, 0 for none): a turn ended since, or `every` actions came, and the log
    grew by a `SNAPSHOT_GROWTH`th since the snapshot.

    Storing a snapshot costs the whole state, which grows with the log. At every turn end
    regardless, a long session paid its whole history again per turn (one session's steps/s
    halved within a minute of turns). With the growth bound, what a session's snapshots
    cost stays within a few per cent of its appends however long it gets, and a cold read
    replays at most a twentieth of the log after its snapshot (5,000 actions of a
    100,000-action session: `benchmarks/catchup.py`)."""
    grown = last - stored
    return grown > 0 and (ended or grown >= every) and grown * SNAPSHOT_GROWTH >= stored


def lookup_idempotency(
    scope: str, key: str, request_hash: str, now: float
) -> Program[IdempotencyOutcome]:
    """What a key holds now, taking nothing: ``New`` when absent or expired."""
    rows = yield Query(
        "SELECT request_hash, status, response FROM idempotency "
        "WHERE scope = ? AND idem_key = ? AND expires_at > ?",
        (scope, key, now),
    )
    if not rows:
        return New()
    held_hash, status, response = rows[0]
    if held_hash != request_hash:
        return Mismatch()
    if status == "completed":
        return Replay(loads(response))
    return InFlight()


def get_snapshot(session_id: str) -> Program[Snapshot | None]:
    rows = yield Query("SELECT seq, state FROM snapshots WHERE session_id = ?", (session_id,))
    return Snapshot(rows[0][0], rows[0][1]) if rows else None
