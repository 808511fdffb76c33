"""Content-addressed blobs in a local directory.

A blob is visible under its sha256 only once its bytes are durable: write to a temp
file in the same filesystem, fsync it, rename it into place, fsync the directory. A
crash at any point leaves either the whole blob or nothing under its name (at worst a
stray ``tmp/*.part``). Reads re-hash, so on-disk corruption is reported, not served.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ._errors import BlobCorrupted, InvalidInput, NotFound

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class BlobRef:
    sha256: str
    size: int


class BlobStore:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._objects = self.root / "sha256"
        self._tmp = self.root / "tmp"

    def path(self, sha256: str) -> Path:
        if not _SHA256.match(sha256):
            raise InvalidInput(f"not a sha256 hex digest: {sha256!r}")
        return self._objects / sha256[:2] / sha256[2:]

    def exists(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def put_bytes(self, data: bytes) -> BlobRef:
        return self.put_chunks([data])

    def put_chunks(self, chunks: Iterable[bytes]) -> BlobRef:
        """Store a stream of bytes; if the iterable raises, nothing becomes visible."""
        self._tmp.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=self._tmp, suffix=".part")
        digest, size = hashlib.sha256(), 0
        try:
            with os.fdopen(fd, "wb") as f:
                for chunk in chunks:
                    f.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
                f.flush()
                os.fsync(f.fileno())
            sha256 = digest.hexdigest()
            target = self.path(sha256)
            if not target.parent.is_dir():
                target.parent.mkdir(parents=True, exist_ok=True)
                _fsync_dir(target.parent.parent)
            # Replacing an existing copy is harmless (same bytes) and heals a corrupted one.
            os.replace(tmp_name, target)
            _fsync_dir(target.parent)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        return BlobRef(sha256, size)

    def read_bytes(self, sha256: str) -> bytes:
        try:
            data = self.path(sha256).read_bytes()
        except FileNotFoundError as exc:
            raise NotFound("blob", sha256) from exc
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            raise BlobCorrupted(sha256, actual)
        return data

    async def put(self, data: bytes) -> BlobRef:
        return await asyncio.to_thread(self.put_bytes, data)

    async def read(self, sha256: str) -> bytes:
        return await asyncio.to_thread(self.read_bytes, sha256)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
