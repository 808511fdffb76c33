"""Blobs in the PostgreSQL database: the shared backend when ``--db`` is PostgreSQL.

Chunks arrive in autocommitted inserts under a fresh upload id, so no transaction stays
open while a producer is slow (the server ends idle transactions after seconds; see
``_postgres``). One short transaction then either names the chunks by the blob's sha256
and inserts its ``blobs`` row, or, when those bytes are already stored, drops them. Reads
stream the chunks in order and re-hash.
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ._blobs import CHUNK, BlobRef, BlobStore, checked_sha256, iterate, verified
from ._errors import NotFound, Unavailable


class PostgresBlobStore(BlobStore):
    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self._pool = pool

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        # The driver's errors end here, as the store's do (`_postgres.translate`): a lost
        # connection (a database restart) is `Unavailable`, which callers know to wait out.
        try:
            async with self._pool.connection() as conn:
                yield conn
        except (psycopg.OperationalError, PoolTimeout) as exc:
            raise Unavailable(f"postgresql blobs: {exc}") from exc

    async def put(self, data: bytes) -> BlobRef:
        sha256 = hashlib.sha256(data).hexdigest()
        if await self.exists(sha256):
            return BlobRef(sha256, len(data))
        return await self.put_stream(data[i : i + CHUNK] for i in range(0, len(data), CHUNK))

    async def put_stream(self, chunks: AsyncIterable[bytes] | Iterable[bytes]) -> BlobRef:
        upload = f"upload:{uuid.uuid4().hex}"
        digest, size, idx = hashlib.sha256(), 0, 0
        try:
            async with self._connection() as conn:
                async for part in _rechunk(iterate(chunks)):
                    await conn.execute(
                        "INSERT INTO blob_chunks (blob, idx, data) VALUES (%s, %s, %b)",
                        (upload, idx, part),
                    )
                    digest.update(part)
                    size += len(part)
                    idx += 1
                sha256 = digest.hexdigest()
                async with conn.transaction():
                    cur = await conn.execute(
                        "INSERT INTO blobs (sha256, size) VALUES (%s, %s) "
                        "ON CONFLICT (sha256) DO NOTHING",
                        (sha256, size),
                    )
                    if cur.rowcount:
                        await conn.execute(
                            "UPDATE blob_chunks SET blob = %s WHERE blob = %s", (sha256, upload)
                        )
                    else:
                        await conn.execute("DELETE FROM blob_chunks WHERE blob = %s", (upload,))
        except BaseException:
            await self._drop_upload(upload)
            raise
        return BlobRef(sha256, size)

    async def read(self, sha256: str) -> bytes:
        checked_sha256(sha256)
        async with self._connection() as conn:
            cur = await conn.execute("SELECT size FROM blobs WHERE sha256 = %s", (sha256,))
            if await cur.fetchone() is None:
                raise NotFound("blob", sha256)
            # Binary results: bytea in text format is hex, twice the bytes and a decode.
            cur = await conn.execute(
                "SELECT data FROM blob_chunks WHERE blob = %s ORDER BY idx", (sha256,), binary=True
            )
            data = b"".join(bytes(row[0]) for row in await cur.fetchall())
        return verified(sha256, data)

    async def exists(self, sha256: str) -> bool:
        checked_sha256(sha256)
        async with self._connection() as conn:
            cur = await conn.execute("SELECT 1 FROM blobs WHERE sha256 = %s", (sha256,))
            return await cur.fetchone() is not None

    async def delete(self, sha256: str) -> None:
        checked_sha256(sha256)
        async with self._connection() as conn, conn.transaction():
            await conn.execute("DELETE FROM blobs WHERE sha256 = %s", (sha256,))
            await conn.execute("DELETE FROM blob_chunks WHERE blob = %s", (sha256,))

    async def _drop_upload(self, upload: str) -> None:
        try:
            async with self._pool.connection() as conn:
                await conn.execute("DELETE FROM blob_chunks WHERE blob = %s", (upload,))
        except Exception:  # the collector removes what a failed cleanup leaves
            pass


async def _rechunk(chunks: AsyncIterable[bytes]) -> AsyncIterable[bytes]:
    """Parts of at most CHUNK bytes, whatever sizes the producer yields."""
    buffer = bytearray()
    async for chunk in chunks:
        buffer += chunk
        while len(buffer) >= CHUNK:
            yield bytes(buffer[:CHUNK])
            del buffer[:CHUNK]
    if buffer:
        yield bytes(buffer)
