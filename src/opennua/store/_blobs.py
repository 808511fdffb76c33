"""The blob contract: content-addressed bytes that every backend keeps the same way.

A blob is named by the sha256 of its bytes and becomes visible under that name only once
all of them are durable; a writer that fails or crashes mid-way leaves nothing under the
name. Reads re-hash and raise :class:`BlobCorrupted` instead of serving other bytes.
Putting the same bytes twice is one blob. Backends: a local directory (the embedded
default, ``_blobs_file``), the PostgreSQL database itself (``_blobs_pg``, shared by every
machine of a scale-out) and S3-compatible object storage (``_blobs_s3``).
"""

from __future__ import annotations

import abc
import hashlib
import re
from collections.abc import AsyncIterable, Iterable
from dataclasses import dataclass

from ._errors import BlobCorrupted, InvalidInput

_SHA256 = re.compile(r"^[0-9a-f]{64}$")

#: Bytes per chunk when a backend stores or sends a blob in parts.
CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class BlobRef:
    sha256: str
    size: int


class BlobStore(abc.ABC):
    """Content-addressed bytes (see the module docstring for the contract)."""

    @abc.abstractmethod
    async def put(self, data: bytes) -> BlobRef:
        """Store ``data``; the same bytes again return the same ref."""

    @abc.abstractmethod
    async def put_stream(self, chunks: AsyncIterable[bytes] | Iterable[bytes]) -> BlobRef:
        """Store a stream of bytes; if the iterable raises, nothing becomes visible."""

    @abc.abstractmethod
    async def read(self, sha256: str) -> bytes:
        """The blob's bytes, re-hashed; :class:`NotFound` or :class:`BlobCorrupted`."""

    @abc.abstractmethod
    async def exists(self, sha256: str) -> bool: ...

    @abc.abstractmethod
    async def delete(self, sha256: str) -> None:
        """Forget a blob (for a collector that knows nothing references it); idempotent."""

    async def close(self) -> None:  # noqa: B027 - most backends hold nothing of their own
        """Release what the backend holds (connections, clients). Idempotent."""


def verified(sha256: str, data: bytes) -> bytes:
    """``data`` as read, if it hashes to ``sha256``; else :class:`BlobCorrupted`."""
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise BlobCorrupted(sha256, actual)
    return data


def checked_sha256(sha256: str) -> str:
    if not isinstance(sha256, str) or not _SHA256.match(sha256):
        raise InvalidInput(f"not a sha256 hex digest: {sha256!r}")
    return sha256


async def iterate(chunks: AsyncIterable[bytes] | Iterable[bytes]) -> AsyncIterable[bytes]:
    """Either kind of chunk source as one async iterator."""
    if isinstance(chunks, AsyncIterable):
        async for chunk in chunks:
            yield chunk
    else:
        for chunk in chunks:
            yield chunk
