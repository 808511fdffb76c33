"""Content-addressed blobs in a local directory: the embedded default.

A blob is visible under its sha256 only once its bytes are durable: write to a temp
file in the same filesystem, fsync it, rename it into place, fsync the directory. A
crash at any point leaves either the whole blob or nothing under its name (at worst a
stray ``tmp/*.part``). Reads re-hash, so on-disk corruption is reported, not served.

Blobs are the user's data: the directories this store makes are 0700 and its files
0600 whatever the process umask (its own ``tmp`` and ``sha256`` folders are tightened
when it first writes, if an older version made them; a root that exists is left as it is).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
from collections.abc import AsyncIterable, Iterable
from pathlib import Path
from typing import IO

from ._blobs import BlobRef, BlobStore, checked_sha256, verified
from ._errors import NotFound, Unavailable


class FileBlobStore(BlobStore):
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._objects = self.root / "sha256"
        self._tmp = self.root / "tmp"
        self._ready = False

    def path(self, sha256: str) -> Path:
        checked_sha256(sha256)
        return self._objects / sha256[:2] / sha256[2:]

    def exists_sync(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def put_bytes(self, data: bytes) -> BlobRef:
        return self.put_chunks([data])

    def put_chunks(self, chunks: Iterable[bytes]) -> BlobRef:
        """Store a stream of bytes; if the iterable raises, nothing becomes visible."""
        upload = self._begin()
        try:
            for chunk in chunks:
                upload.write(chunk)
            return upload.commit()
        except BaseException:
            upload.abort()
            raise

    def read_bytes(self, sha256: str) -> bytes:
        try:
            data = self.path(sha256).read_bytes()
        except FileNotFoundError as exc:
            raise NotFound("blob", sha256) from exc
        return verified(sha256, data)

    async def put(self, data: bytes) -> BlobRef:
        return await asyncio.to_thread(self.put_bytes, data)

    async def put_stream(self, chunks: AsyncIterable[bytes] | Iterable[bytes]) -> BlobRef:
        if not isinstance(chunks, AsyncIterable):
            return await asyncio.to_thread(self.put_chunks, chunks)
        upload = await asyncio.to_thread(self._begin)
        try:
            async for chunk in chunks:
                await asyncio.to_thread(upload.write, chunk)
            return await asyncio.to_thread(upload.commit)
        except BaseException:
            upload.abort()
            raise

    async def read(self, sha256: str) -> bytes:
        return await asyncio.to_thread(self.read_bytes, sha256)

    async def exists(self, sha256: str) -> bool:
        return await asyncio.to_thread(self.exists_sync, sha256)

    async def delete(self, sha256: str) -> None:
        await asyncio.to_thread(self.path(sha256).unlink, missing_ok=True)

    def _begin(self) -> _Upload:
        try:
            if not self._ready:
                for folder in (self._tmp, self._objects):
                    private_dirs(folder)
                    private(folder, 0o700)
                self._ready = True
            return _Upload(self)
        except OSError as exc:
            raise _unavailable(exc) from exc


def _unavailable(exc: OSError) -> Unavailable:
    # A full disk, a read-only or vanished mount: the blob store cannot write now.
    return Unavailable(f"the blob directory cannot be written: {exc.strerror or exc}")


class _Upload:
    """One blob being written to ``tmp/``; renamed under its sha256 by :meth:`commit`."""

    def __init__(self, blobs: FileBlobStore) -> None:
        self._blobs = blobs
        fd, self._name = tempfile.mkstemp(dir=blobs._tmp, suffix=".part")
        os.fchmod(fd, 0o600)  # mkstemp's 0600 is cut further by a strict umask
        self._file: IO[bytes] = os.fdopen(fd, "wb")
        self._digest = hashlib.sha256()
        self._size = 0

    def write(self, chunk: bytes) -> None:
        try:
            self._file.write(chunk)
        except OSError as exc:
            raise _unavailable(exc) from exc
        self._digest.update(chunk)
        self._size += len(chunk)

    def commit(self) -> BlobRef:
        try:
            return self._commit()
        except OSError as exc:
            raise _unavailable(exc) from exc

    def _commit(self) -> BlobRef:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        sha256 = self._digest.hexdigest()
        target = self._blobs.path(sha256)
        if not target.parent.is_dir():
            private_dirs(target.parent)
            _fsync_dir(target.parent.parent)
        # Replacing an existing copy is harmless (same bytes) and heals a corrupted one.
        os.replace(self._name, target)
        _fsync_dir(target.parent)
        return BlobRef(sha256, self._size)

    def abort(self) -> None:
        self._file.close()
        Path(self._name).unlink(missing_ok=True)


def private_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents as directories only their owner can
    enter (0700, whatever the umask). Existing ones are left as they are."""
    missing = []
    for folder in (path, *path.parents):
        if folder.is_dir():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:  # a concurrent writer made it
            continue
        os.chmod(folder, 0o700)  # mkdir's mode is cut by the umask


def private(path: Path, mode: int) -> None:
    """chmod ``path`` to ``mode`` if it is not already; leave what belongs to someone else."""
    try:
        st = path.stat()
        if st.st_mode & 0o777 != mode and st.st_uid == os.geteuid():
            os.chmod(path, mode)
    except FileNotFoundError:
        pass


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
