"""The bridge's own durable state, in one SQLite file: room bindings, the sync cursor, the
delivery outbox with each delivery's state, and the reports still owed to the Host.

This is not the session store (the bridge never touches that): it is what a chat client
keeps locally so a restart resumes where it stopped. A delivery is inserted once per
identity (`INSERT OR IGNORE`), so deriving it again after a crash adds nothing; a state
change and the report it owes the Host are written in one transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._deliveries import DeliveryState

_SCHEMA = """
CREATE TABLE IF NOT EXISTS bindings (
    room_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    if_busy TEXT NOT NULL,
    first_turn INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS cursor (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS deliveries (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    room_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    event_type TEXT NOT NULL,
    content TEXT NOT NULL,
    parent TEXT,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    event_id TEXT,
    next_at REAL,
    error_code TEXT,
    error_message TEXT,
    source TEXT
);
CREATE INDEX IF NOT EXISTS deliveries_open ON deliveries (status, n);
CREATE TABLE IF NOT EXISTS uploads (delivery_id TEXT PRIMARY KEY, mxc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reports (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    body TEXT NOT NULL
);
-- The turn a delivery renders, kept only while tracing is on (its span joins the turn).
CREATE TABLE IF NOT EXISTS delivery_turns (
    delivery_id TEXT PRIMARY KEY,
    turn_id TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    client_id TEXT
);
CREATE TABLE IF NOT EXISTS answers (
    request_id TEXT PRIMARY KEY,
    sender TEXT NOT NULL,
    event_id TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class Binding:
    room_id: str
    session_id: str
    if_busy: str
    #: Turns before this index were there before the room was bound; they get no card.
    first_turn: int


@dataclass(frozen=True)
class Outgoing:
    """A delivery as queued: the event to send, and the delivery whose event it relates to
    (an edit or a reaction needs its target's event id, known only once that was sent)."""

    state: DeliveryState
    event_type: str
    content: dict[str, Any]
    parent: str | None
    source: str | None


class Ledger:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- bindings and cursors ----------------------------------------------------------

    def bind(self, binding: Binding) -> Binding:
        """Bind a room (the first binding stays: a room follows one session)."""
        with self._tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO bindings VALUES (?, ?, ?, ?)",
                (binding.room_id, binding.session_id, binding.if_busy, binding.first_turn),
            )
        found = self.binding(binding.room_id)
        assert found is not None
        return found

    def set_if_busy(self, room_id: str, if_busy: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE bindings SET if_busy = ? WHERE room_id = ?", (if_busy, room_id))

    def binding(self, room_id: str) -> Binding | None:
        row = self._db.execute("SELECT * FROM bindings WHERE room_id = ?", (room_id,)).fetchone()
        return Binding(*row) if row else None

    def bindings(self) -> list[Binding]:
        return [Binding(*row) for row in self._db.execute("SELECT * FROM bindings")]

    def cursor(self, name: str) -> str | None:
        row = self._db.execute("SELECT value FROM cursor WHERE name = ?", (name,)).fetchone()
        return str(row[0]) if row else None

    def set_cursor(self, name: str, value: str) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO cursor VALUES (?, ?)", (name, value))

    # -- the outbox --------------------------------------------------------------------

    def enqueue(self, out: Outgoing, report: dict[str, Any]) -> bool:
        """Queue a delivery unless one with its identity exists; True when it is new."""
        s = out.state
        with self._tx() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO deliveries (delivery_id, session_id, room_id, kind,"
                " event_type, content, parent, status, source) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    s.delivery_id,
                    s.session_id,
                    s.room_id,
                    s.kind,
                    out.event_type,
                    json.dumps(out.content),
                    out.parent,
                    s.status,
                    out.source,
                ),
            )
            if cur.rowcount:
                db.execute(
                    "INSERT INTO reports (session_id, body) VALUES (?, ?)",
                    (s.session_id, json.dumps(report)),
                )
            return bool(cur.rowcount)

    def update(self, state: DeliveryState, report: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE deliveries SET status=?, attempts=?, event_id=?, next_at=?,"
                " error_code=?, error_message=? WHERE delivery_id=?",
                (
                    state.status,
                    state.attempts,
                    state.event_id,
                    state.next_at,
                    state.error_code,
                    state.error_message,
                    state.delivery_id,
                ),
            )
            db.execute(
                "INSERT INTO reports (session_id, body) VALUES (?, ?)",
                (state.session_id, json.dumps(report)),
            )

    def open_deliveries(self) -> list[Outgoing]:
        """Deliveries not yet sent or failed, oldest first (each room's order kept)."""
        rows = self._db.execute(
            "SELECT * FROM deliveries WHERE status IN ('pending', 'retrying') ORDER BY n"
        ).fetchall()
        return [_outgoing(row) for row in rows]

    def get(self, delivery_id: str) -> Outgoing | None:
        row = self._db.execute(
            "SELECT * FROM deliveries WHERE delivery_id = ?", (delivery_id,)
        ).fetchone()
        return _outgoing(row) if row else None

    def latest(self, session_id: str, kind: str, source: str) -> Outgoing | None:
        """The newest delivery of `kind` from `source` (a card's last edit)."""
        row = self._db.execute(
            "SELECT * FROM deliveries WHERE session_id = ? AND kind = ? AND source = ?"
            " ORDER BY n DESC LIMIT 1",
            (session_id, kind, source),
        ).fetchone()
        return _outgoing(row) if row else None

    def event_of(self, delivery_id: str) -> str | None:
        row = self._db.execute(
            "SELECT event_id FROM deliveries WHERE delivery_id = ?", (delivery_id,)
        ).fetchone()
        return row[0] if row else None

    def source_of_event(self, event_id: str) -> tuple[str, str, str] | None:
        """(session, kind, source) of the delivery that became `event_id`."""
        row = self._db.execute(
            "SELECT session_id, kind, source FROM deliveries WHERE event_id = ?", (event_id,)
        ).fetchone()
        return (row[0], row[1], row[2]) if row else None

    def counts(self) -> dict[str, int]:
        rows = self._db.execute("SELECT status, count(*) FROM deliveries GROUP BY status")
        return {status: n for status, n in rows}

    # -- the turn a delivery renders (tracing) ----------------------------------------

    def set_turn(self, delivery_id: str, turn_id: str, execution_id: str, client_id: str) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO delivery_turns VALUES (?, ?, ?, ?)",
                (delivery_id, turn_id, execution_id, client_id),
            )

    def turn_of(self, delivery_id: str) -> dict[str, str] | None:
        row = self._db.execute(
            "SELECT turn_id, execution_id, client_id FROM delivery_turns WHERE delivery_id = ?",
            (delivery_id,),
        ).fetchone()
        if row is None:
            return None
        return {"turn_id": row[0], "execution_id": row[1], "client_id": row[2] or ""}

    # -- uploads, answers, reports ------------------------------------------------------

    def upload(self, delivery_id: str) -> str | None:
        row = self._db.execute(
            "SELECT mxc FROM uploads WHERE delivery_id = ?", (delivery_id,)
        ).fetchone()
        return row[0] if row else None

    def set_upload(self, delivery_id: str, mxc: str) -> None:
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO uploads VALUES (?, ?)", (delivery_id, mxc))

    def answered(self, request_id: str, sender: str, event_id: str) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR IGNORE INTO answers VALUES (?, ?, ?)", (request_id, sender, event_id)
            )

    def answerer(self, request_id: str) -> str | None:
        row = self._db.execute(
            "SELECT sender FROM answers WHERE request_id = ?", (request_id,)
        ).fetchone()
        return row[0] if row else None

    def reports(self, limit: int = 100) -> list[tuple[int, str, dict[str, Any]]]:
        rows = self._db.execute(
            "SELECT n, session_id, body FROM reports ORDER BY n LIMIT ?", (limit,)
        ).fetchall()
        return [(n, sid, json.loads(body)) for n, sid, body in rows]

    def reported(self, n: int) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM reports WHERE n = ?", (n,))


def _outgoing(row: tuple[Any, ...]) -> Outgoing:
    (_n, did, sid, room, kind, etype, content, parent, status, attempts, event_id, next_at,
     code, message, source) = row  # fmt: skip
    state = DeliveryState(
        delivery_id=did,
        session_id=sid,
        room_id=room,
        kind=kind,
        status=status,
        attempts=attempts,
        event_id=event_id,
        next_at=next_at,
        error_code=code,
        error_message=message,
    )
    return Outgoing(state, etype, json.loads(content), parent, source)


__all__ = ["Binding", "Ledger", "Outgoing"]
