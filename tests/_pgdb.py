"""A PostgreSQL database of one test's or one benchmark's own: made on the given server,
dropped after, so a run never finds another run's rows (or its secret key's check row)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator

import psycopg


@contextlib.contextmanager
def scratch_database(admin_url: str, prefix: str) -> Iterator[str]:
    name = f"{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
