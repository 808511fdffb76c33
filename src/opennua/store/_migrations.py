"""Numbered SQL migrations per backend, recorded in a ``schema_version`` table, and
PostgreSQL's server-side functions.

Files live in ``migrations/<backend>/NNNN_name.sql`` and hold only schema (tables,
indexes, data moves). Opening a store applies the missing ones in order, each together
with its version row; a database whose version is above what this code ships is refused
(``SchemaTooNew``). PostgreSQL's functions live in one replaceable file,
``sql/postgres_functions.sql``, applied in the same transaction when its sha256 differs
from the one the database records.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from ._errors import SchemaTooNew

if TYPE_CHECKING:
    # Only for PostgreSQL's types: an embedded (SQLite) start does not import psycopg.
    import psycopg

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
# Serializes concurrent openers of one PostgreSQL database (any fixed number will do).
_PG_LOCK_KEY = 0x6E7561


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations(backend: str) -> list[Migration]:
    folder = resources.files("opennua.store").joinpath("migrations", backend)
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    assert [m.version for m in found] == list(range(1, len(found) + 1)), found
    return found


def latest_version(backend: str) -> int:
    return len(migrations(backend))


def migrate_sqlite(conn: sqlite3.Connection, target: int | None = None) -> int:
    """Bring a SQLite database (autocommit connection) up to ``target``; return its version."""
    steps = migrations("sqlite")
    supported = len(steps) if target is None else target
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version "
        "(version INTEGER PRIMARY KEY, name TEXT NOT NULL)"
    )
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
        found = int(row[0])
        if found > len(steps):
            raise SchemaTooNew(found, len(steps))
        for m in steps[found:supported]:
            # executescript would COMMIT first; run statements one by one instead so the
            # migration and its version row share the transaction.
            for statement in _statements(m.sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_version (version, name) VALUES (?, ?)", (m.version, m.name)
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return max(found, supported)


def postgres_functions() -> str:
    """The text of ``sql/postgres_functions.sql``."""
    return (
        resources.files("opennua.store")
        .joinpath("sql", "postgres_functions.sql")
        .read_text("utf-8")
    )


async def migrate_postgres(
    conn: psycopg.AsyncConnection[tuple[object, ...]], target: int | None = None
) -> int:
    """Bring a PostgreSQL database up to ``target``; safe against concurrent openers.

    At the latest version, also (re)install the server-side functions if the file
    changed since they were installed.
    """
    steps = migrations("postgres")
    supported = len(steps) if target is None else target
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PG_LOCK_KEY,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL)"
        )
        cur = await conn.execute("SELECT coalesce(max(version), 0) FROM schema_version")
        row = await cur.fetchone()
        assert row is not None
        found = int(str(row[0]))
        if found > len(steps):
            raise SchemaTooNew(found, len(steps))
        for m in steps[found:supported]:
            await conn.execute(m.sql.encode())
            await conn.execute(
                "INSERT INTO schema_version (version, name) VALUES (%s, %s)", (m.version, m.name)
            )
        if max(found, supported) == len(steps):
            await _install_functions(conn)
    return max(found, supported)


async def _install_functions(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
    # Inside the migration transaction, under its lock: concurrent openers apply the
    # file once, and other connections see the old functions or the new, never neither.
    sql = postgres_functions()
    digest = hashlib.sha256(sql.encode()).hexdigest()
    cur = await conn.execute("SELECT sha256 FROM server_functions")
    if [row[0] for row in await cur.fetchall()] == [digest]:
        return
    await conn.execute(sql.encode())
    await conn.execute("DELETE FROM server_functions")
    await conn.execute("INSERT INTO server_functions (sha256) VALUES (%s)", (digest,))


def _statements(script: str) -> list[str]:
    """Split a migration into statements (our files keep ';' only at statement ends)."""
    body = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]
