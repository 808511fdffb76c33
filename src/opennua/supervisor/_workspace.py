"""An execution's workspace files as content-addressed manifests in the blob store.

A commit records every regular file of the workspace directory — relative path,
executable bit, size, sha256 — as one canonical JSON manifest, itself a blob; the bytes of
each file are blobs too, so unchanged files are never stored again. Which files changed is
read off an index kept beside the workspace (path → mtime, size, inode, sha256), so a
commit hashes only what was touched since the last one, as git's index does (and, like
git, trusts a file whose mtime, size and inode are all unchanged).

A restore makes the directory equal to a manifest and returns the paths whose local copy
differed: changes that were written but never committed, now lost. Only regular files
are kept: a symlink, a device or a FIFO is neither committed nor restored, and a hard link
comes back as a file of its own, so nothing planted in one workspace can point out of the
workspace it is restored into.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import stat
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from opennua.store import BlobStore

MANIFEST_FORMAT = 1
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Entry:
    path: str  # relative, "/"-separated
    executable: bool
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Manifest:
    """A committed workspace: None for ``sha256`` when nothing was ever committed."""

    sha256: str | None
    files: int
    bytes: int


EMPTY = Manifest(None, 0, 0)


class Workspace:
    def __init__(self, root: Path, index_path: Path, blobs: BlobStore) -> None:
        self.root = root
        self._index_path = index_path
        self._blobs = blobs
        self._index: dict[str, list[Any]] | None = None  # the file's contents, once read
        #: The last manifest this object stored or restored: known to be in the blob store.
        self._stored: str | None = None

    async def commit(self) -> Manifest:
        """Store the files as they are now; return the manifest that names them. An
        unchanged workspace costs one thread hop: the scan, which hashes nothing."""
        found, touched, index = await self._scan()
        for rel in touched:
            st, sha256 = found[rel]
            sha256 = await self._store_file(rel, sha256)
            found[rel] = (st, sha256)
            index[rel] = [st.st_mtime_ns, st.st_size, st.st_ino, sha256]
        for rel in index.keys() - found.keys():
            del index[rel]
        body = _encode(found)
        manifest = hashlib.sha256(body).hexdigest()
        # An unchanged workspace writes nothing, not even its manifest: a step that touched
        # no file does not depend on the blob store accepting writes.
        if touched or (manifest != self._stored and not await self._blobs.exists(manifest)):
            manifest = (await self._blobs.put(body)).sha256
        self._stored = manifest
        if touched or len(index) != len(found):
            await asyncio.to_thread(self._save_index, index)
        size = sum(st.st_size for st, _ in found.values())
        return Manifest(manifest, len(found), size)

    async def _scan(
        self,
    ) -> tuple[dict[str, tuple[os.stat_result, str]], set[str], dict[str, list[Any]]]:
        """The files as they are, those changed since the index, and the index: one thread
        hop, reading the index first if this object has not yet."""
        if self._index is None:
            return await asyncio.to_thread(self._scan_loaded)
        index = self._index
        found, touched = await asyncio.to_thread(_scan, self.root, index)
        return found, touched, index

    def _scan_loaded(
        self,
    ) -> tuple[dict[str, tuple[os.stat_result, str]], set[str], dict[str, list[Any]]]:
        self._index = index = self._load_index()
        found, touched = _scan(self.root, index)
        return found, touched, index

    async def restore(self, manifest: str) -> tuple[Manifest, list[str], int]:
        """Make the directory equal to ``manifest``; return it, the sorted paths whose local
        copy differed from it (lost uncommitted changes) and how many files were written."""
        wanted = decode_manifest(await self._blobs.read(manifest))
        found, _, index = await self._scan()
        before = {rel: list(cached) for rel, cached in index.items()}
        lost: list[str] = []
        for rel, (st, sha256) in found.items():
            entry = wanted.get(rel)
            if entry is None or entry.sha256 != sha256:
                lost.append(rel)
                await asyncio.to_thread(os.unlink, self.root / rel)
                index.pop(rel, None)
            else:
                if entry.executable != bool(st.st_mode & 0o111):
                    await asyncio.to_thread(os.chmod, self.root / rel, _mode(entry))
                index[rel] = [st.st_mtime_ns, st.st_size, st.st_ino, sha256]
        written = 0
        for rel, entry in wanted.items():
            present = found.get(rel)
            if present is not None and present[1] == entry.sha256:
                continue
            written += 1
            data = await self._blobs.read(entry.sha256)
            st = await asyncio.to_thread(_write_file, self.root, rel, data, _mode(entry))
            index[rel] = [st.st_mtime_ns, st.st_size, st.st_ino, entry.sha256]
        # The common case, a next attempt on the same disk, finds the files as committed:
        # the index is as it was, and rewriting it was a temp file and a rename per attempt.
        if index != before:
            await asyncio.to_thread(self._save_index, index)
        self._stored = manifest
        size = sum(e.size for e in wanted.values())
        return Manifest(manifest, len(wanted), size), sorted(lost), written

    async def clear(self) -> list[str]:
        """Remove every file (a workspace retention retired); the sorted paths removed."""
        found, _, index = await self._scan()
        for rel in found:
            await asyncio.to_thread(os.unlink, self.root / rel)
        index.clear()
        await asyncio.to_thread(self._save_index, index)
        return sorted(found)

    async def _store_file(self, rel: str, sha256: str) -> str:
        if await self._blobs.exists(sha256):
            return sha256
        # The stored bytes name the file in the manifest: a tool still writing it between
        # the hash and this read is recorded as what was read.
        ref = await self._blobs.put_stream(_read_chunks(self.root / rel))
        return ref.sha256

    def _load_index(self) -> dict[str, list[Any]]:
        # Only a cache: a missing or damaged index costs a re-hash, never a wrong commit
        # (short of a file rewritten with its mtime, size and inode all kept, as in git).
        try:
            loaded = orjson.loads(self._index_path.read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def _save_index(self, index: dict[str, list[Any]]) -> None:
        self._index_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self._index_path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(orjson.dumps(index))
        os.replace(tmp, self._index_path)


class WorkspaceLock:
    """An exclusive lock on a session's workspace directory while an attempt restores it.

    Fencing protects the store, not the disk: an attempt paused past its lease (SIGSTOP, a
    long GC) still runs its next line when it wakes, and that line may be a restore of the
    manifest it read before the pause, deleting what the attempt after it wrote and
    committed. Supervisors that share a data directory therefore read the manifest and
    restore it under this lock, and check their epoch only once they hold it. The lock is
    held for the restore alone, so a frozen attempt stalls the next one only if it froze
    inside its own restore. It is an ``flock`` on a file beside the workspace index (no
    tool sees it); the kernel drops it when the process dies. Supervisors on other
    machines have workspaces of their own and never meet here.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        self._path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # Retention removes the file under the lock: a lock taken on a file no longer
            # at the path guards nothing another process could open.
            if os.fstat(fd).st_ino != os.stat(self._path).st_ino:
                raise BlockingIOError
        except (BlockingIOError, FileNotFoundError):
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self, *, remove: bool = False) -> None:
        """Let go; ``remove``: the workspace is retired, its lock file goes too."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            if remove:
                with contextlib.suppress(FileNotFoundError):
                    self._path.unlink()
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _scan(
    root: Path, index: dict[str, list[Any]]
) -> tuple[dict[str, tuple[os.stat_result, str]], set[str]]:
    """Every regular file under ``root`` with its sha256, and the paths that were hashed
    because the index did not vouch for them."""
    found: dict[str, tuple[os.stat_result, str]] = {}
    touched: set[str] = set()
    stack = [""]
    while stack:
        prefix = stack.pop()
        try:
            entries = list(os.scandir(root / prefix if prefix else root))
        except FileNotFoundError:
            continue
        for item in entries:
            rel = f"{prefix}{item.name}"
            st = item.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                stack.append(rel + "/")
            elif stat.S_ISREG(st.st_mode):
                known = index.get(rel)
                if known is not None and known[:3] == [st.st_mtime_ns, st.st_size, st.st_ino]:
                    found[rel] = (st, str(known[3]))
                else:
                    found[rel] = (st, _hash_file(root / rel))
                    touched.add(rel)
    return found, touched


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


async def _read_chunks(path: Path) -> AsyncIterator[bytes]:
    f = await asyncio.to_thread(open, path, "rb")
    try:
        while chunk := await asyncio.to_thread(f.read, _CHUNK):
            yield chunk
    finally:
        f.close()


def _write_file(root: Path, rel: str, data: bytes, mode: int) -> os.stat_result:
    """Write ``rel`` under ``root`` through real directories only (a symlink or file in the
    way is removed: neither is part of a workspace), atomically by rename."""
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"not a workspace path: {rel!r}")
    folder = root
    for name in parts[:-1]:
        folder = folder / name
        try:
            st = folder.lstat()
            if not stat.S_ISDIR(st.st_mode):
                folder.unlink()
                folder.mkdir(mode=0o700)
        except FileNotFoundError:
            folder.mkdir(mode=0o700)
    target = folder / parts[-1]
    if target.is_symlink() or (target.exists() and not target.is_file()):
        target.unlink()
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".restore")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, target)
    return target.lstat()


def _mode(entry: Entry) -> int:
    return 0o755 if entry.executable else 0o644


def _encode(found: dict[str, tuple[os.stat_result, str]]) -> bytes:
    """The canonical manifest: files sorted by path, so the same files give the same blob."""
    files = [
        [rel, bool(st.st_mode & 0o111), st.st_size, sha256]
        for rel, (st, sha256) in sorted(found.items())
    ]
    return orjson.dumps({"format": MANIFEST_FORMAT, "files": files})


def decode_manifest(raw: bytes) -> dict[str, Entry]:
    body = orjson.loads(raw)
    if body.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"unknown workspace manifest format {body.get('format')!r}")
    return {path: Entry(path, bool(x), int(size), str(sha)) for path, x, size, sha in body["files"]}
