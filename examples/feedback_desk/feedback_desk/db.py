"""The desk's own database (SQLite): its users, tickets, attachments, dispatches, drafts,
published replies and the webhook events it processed. opennua's store is never read.

One connection, serialised by a lock: the desk is small and every statement is short.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS users (
    username TEXT PRIMARY KEY, salt BLOB NOT NULL, password_hash BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS logins (
    token_hash TEXT PRIMARY KEY, username TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tickets (
    ticket_id TEXT PRIMARY KEY, seq INTEGER NOT NULL UNIQUE, public_token TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL, body TEXT NOT NULL, name TEXT NOT NULL, email TEXT NOT NULL,
    revision INTEGER NOT NULL DEFAULT 1, session_id TEXT, created_at TEXT NOT NULL,
    closed INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS messages (
    ticket_id TEXT NOT NULL, revision INTEGER NOT NULL, author TEXT NOT NULL,
    body TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (ticket_id, revision, author));
CREATE TABLE IF NOT EXISTS attachments (
    attachment_id TEXT PRIMARY KEY, ticket_id TEXT NOT NULL, revision INTEGER NOT NULL,
    filename TEXT NOT NULL, media_type TEXT NOT NULL, size INTEGER NOT NULL,
    sha256 TEXT NOT NULL, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS dispatches (
    ticket_id TEXT NOT NULL, revision INTEGER NOT NULL, idempotency_key TEXT NOT NULL UNIQUE,
    prompt TEXT NOT NULL, context TEXT NOT NULL, session_id TEXT, turn_id TEXT,
    execution_id TEXT, status TEXT NOT NULL, last_seq INTEGER NOT NULL DEFAULT 0,
    output TEXT, error TEXT, waiting_prompt TEXT, plugin TEXT, requests TEXT NOT NULL DEFAULT '{}',
    reply_edit TEXT, link_decisions TEXT NOT NULL DEFAULT '{}',
    dispatched_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    PRIMARY KEY (ticket_id, revision));
CREATE TABLE IF NOT EXISTS replies (
    ticket_id TEXT NOT NULL, revision INTEGER NOT NULL, body TEXT NOT NULL,
    published_by TEXT NOT NULL, published_at TEXT NOT NULL,
    PRIMARY KEY (ticket_id, revision));
CREATE TABLE IF NOT EXISTS links (
    ticket_id TEXT NOT NULL, linked_id TEXT NOT NULL, decided_by TEXT NOT NULL,
    PRIMARY KEY (ticket_id, linked_id));
CREATE TABLE IF NOT EXISTS articles (
    article_id TEXT PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    event_id TEXT PRIMARY KEY, type TEXT NOT NULL, received_at TEXT NOT NULL);
"""

#: Statuses a dispatch may have; the last two and `failed` are final.
STATUSES = ("dispatching", "accepted", "working", "waiting for us", "draft ready", "failed")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _hash_password(password: str, salt: bytes) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 200_000)


class Database:
    """SQLite at a path (the default), or PostgreSQL at a `postgresql://` URL. The SQL is
    written once, in the dialect both speak (`ON CONFLICT`), with `?` placeholders."""

    def __init__(self, where: Path | str) -> None:
        self.where = str(where)
        self.postgres = self.where.startswith(("postgresql://", "postgres://"))
        self._lock = threading.RLock()
        self._conn: Any
        if self.postgres:
            import psycopg
            from psycopg.rows import dict_row

            self._conn = psycopg.connect(self.where, autocommit=True, row_factory=dict_row)
            with self._conn.transaction():
                for statement in SCHEMA.replace("BLOB", "BYTEA").split(";"):
                    if statement.strip():
                        self._conn.execute(statement)
        else:
            self._conn = sqlite3.connect(self.where, check_same_thread=False, isolation_level=None)
            self._conn.row_factory = sqlite3.Row
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA busy_timeout=5000")
            self._conn.executescript(SCHEMA)
        self.setting("install_id", default=secrets.token_hex(6))
        # The key the gateway presents to the desk's MCP server (held by opennua as a
        # workspace secret, never by the model).
        self.setting("api_key", default=secrets.token_urlsafe(32))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def tx(self) -> Iterator[Database]:
        """One transaction: the statements made through this object inside it commit
        together (the lock keeps every other statement out)."""
        with self._lock:
            if self.postgres:
                with self._conn.transaction():
                    yield self
                return
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _execute(self, sql: str, args: tuple[Any, ...]) -> Any:
        return self._conn.execute(sql.replace("?", "%s") if self.postgres else sql, args)

    def one(self, sql: str, *args: Any) -> dict[str, Any] | None:
        with self._lock:
            row = self._execute(sql, args).fetchone()
        return dict(row) if row is not None else None

    def all(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._execute(sql, args).fetchall()]

    def run(self, sql: str, *args: Any) -> int:
        with self._lock:
            return int(self._execute(sql, args).rowcount)

    # -- settings and users ----------------------------------------------------------------

    def setting(self, key: str, *, default: str | None = None) -> str | None:
        """A setting; `default` is stored the first time (so an install id is stable)."""
        with self.tx() as tx:
            row = tx.one("SELECT value FROM settings WHERE key = ?", key)
            if row is not None:
                return str(row["value"])
            if default is not None:
                tx.run("INSERT INTO settings VALUES (?, ?)", key, default)
            return default

    def set_setting(self, key: str, value: str) -> None:
        self.run(
            "INSERT INTO settings VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            key,
            value,
        )

    def add_user(self, username: str, password: str) -> None:
        salt = secrets.token_bytes(16)
        self.run(
            "INSERT INTO users VALUES (?, ?, ?) ON CONFLICT (username) DO UPDATE"
            " SET salt = excluded.salt, password_hash = excluded.password_hash",
            username,
            salt,
            _hash_password(password, salt),
        )

    def check_password(self, username: str, password: str) -> bool:
        user = self.one("SELECT salt, password_hash FROM users WHERE username = ?", username)
        if user is None:
            return False
        return secrets.compare_digest(_hash_password(password, user["salt"]), user["password_hash"])

    def login(self, username: str) -> str:
        token = secrets.token_urlsafe(32)
        digest = hashlib.sha256(token.encode()).hexdigest()
        self.run("INSERT INTO logins VALUES (?, ?, ?)", digest, username, now())
        return token

    def logged_in(self, token: str | None) -> str | None:
        if not token:
            return None
        digest = hashlib.sha256(token.encode()).hexdigest()
        row = self.one("SELECT username FROM logins WHERE token_hash = ?", digest)
        return None if row is None else str(row["username"])

    # -- tickets -----------------------------------------------------------------------------

    def create_ticket(
        self, title: str, body: str, name: str, email: str, *, closed: bool = False
    ) -> dict[str, Any]:
        with self.tx() as tx:
            top = tx.one("SELECT COALESCE(MAX(seq), 1000) + 1 AS seq FROM tickets")
            assert top is not None
            seq = int(top["seq"])
            ticket_id = f"T-{seq}"
            tx.run(
                "INSERT INTO tickets (ticket_id, seq, public_token, title, body, name, email,"
                " created_at, closed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                *(ticket_id, seq, secrets.token_urlsafe(24), title, body, name, email),
                *(now(), int(closed)),
            )
        found = self.ticket(ticket_id)
        assert found is not None
        return found

    def ticket(self, ticket_id: str) -> dict[str, Any] | None:
        return self.one("SELECT * FROM tickets WHERE ticket_id = ?", ticket_id)

    def ticket_by_token(self, token: str) -> dict[str, Any] | None:
        return self.one("SELECT * FROM tickets WHERE public_token = ?", token)

    def tickets(self) -> list[dict[str, Any]]:
        return self.all("SELECT * FROM tickets ORDER BY seq DESC")

    def follow_up(self, ticket_id: str, text: str) -> int:
        """Record the submitter's message as the ticket's next revision."""
        with self.tx() as tx:
            tx.run("UPDATE tickets SET revision = revision + 1 WHERE ticket_id = ?", ticket_id)
            row = tx.one("SELECT revision FROM tickets WHERE ticket_id = ?", ticket_id)
            assert row is not None
            revision = int(row["revision"])
            tx.run(
                "INSERT INTO messages VALUES (?, ?, 'submitter', ?, ?)",
                ticket_id,
                revision,
                text,
                now(),
            )
        return revision

    def messages(self, ticket_id: str) -> list[dict[str, Any]]:
        return self.all("SELECT * FROM messages WHERE ticket_id = ? ORDER BY revision", ticket_id)

    def add_attachment(
        self, ticket_id: str, revision: int, filename: str, media_type: str, data: bytes
    ) -> str:
        attachment_id = "A-" + secrets.token_hex(6)
        self.run(
            "INSERT INTO attachments VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            attachment_id,
            ticket_id,
            revision,
            filename,
            media_type,
            len(data),
            hashlib.sha256(data).hexdigest(),
            data,
        )
        return attachment_id

    def attachments(self, ticket_id: str, revision: int | None = None) -> list[dict[str, Any]]:
        if revision is None:
            return self.all("SELECT * FROM attachments WHERE ticket_id = ?", ticket_id)
        return self.all(
            "SELECT * FROM attachments WHERE ticket_id = ? AND revision = ?", ticket_id, revision
        )

    # -- dispatches -------------------------------------------------------------------------

    def dispatch(self, ticket_id: str, revision: int) -> dict[str, Any] | None:
        row = self.one(
            "SELECT * FROM dispatches WHERE ticket_id = ? AND revision = ?", ticket_id, revision
        )
        return None if row is None else _decoded(row)

    def dispatches(self, ticket_id: str | None = None) -> list[dict[str, Any]]:
        if ticket_id is None:
            rows = self.all("SELECT * FROM dispatches ORDER BY dispatched_at")
        else:
            rows = self.all(
                "SELECT * FROM dispatches WHERE ticket_id = ? ORDER BY revision", ticket_id
            )
        return [_decoded(r) for r in rows]

    def dispatch_by_turn(self, turn_id: str) -> dict[str, Any] | None:
        row = self.one("SELECT * FROM dispatches WHERE turn_id = ?", turn_id)
        return None if row is None else _decoded(row)

    def open_dispatches(self) -> list[dict[str, Any]]:
        rows = self.all(
            "SELECT * FROM dispatches WHERE status NOT IN ('draft ready', 'failed')"
            " ORDER BY dispatched_at"
        )
        return [_decoded(r) for r in rows]

    def update_dispatch(self, ticket_id: str, revision: int, **fields: Any) -> None:
        encoded = {k: json.dumps(v) if k in _JSON_FIELDS else v for k, v in fields.items()}
        encoded["updated_at"] = now()
        columns = ", ".join(f"{k} = ?" for k in encoded)
        self.run(
            f"UPDATE dispatches SET {columns} WHERE ticket_id = ? AND revision = ?",
            *encoded.values(),
            ticket_id,
            revision,
        )

    # -- webhook events ----------------------------------------------------------------------

    def events_list(self) -> list[dict[str, Any]]:
        return self.all("SELECT * FROM events ORDER BY received_at")

    def claim_event(self, event_id: str, kind: str) -> bool:
        """True the first time an event id is seen: a repeat is dropped."""
        received = datetime.now(UTC).isoformat()  # microseconds: the order of arrival
        inserted = self.run(
            "INSERT INTO events VALUES (?, ?, ?) ON CONFLICT DO NOTHING", event_id, kind, received
        )
        return inserted == 1


_JSON_FIELDS = {"context", "output", "error", "plugin", "link_decisions", "requests"}


def _decoded(row: dict[str, Any]) -> dict[str, Any]:
    for key in _JSON_FIELDS:
        if row.get(key) is not None:
            row[key] = json.loads(row[key])
    return row
