"""``open_store(url)``: pick the backend from the URL, migrate, return a ready Store."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ._base import Store
from ._blobs import BlobStore
from ._blobs_file import FileBlobStore, private_dirs
from ._errors import InvalidInput


async def open_store(
    url: str, *, data_dir: str | os.PathLike[str] | None = None, blobs: str | None = None
) -> Store:
    """Open (and migrate) the store at ``url``.

    ``sqlite:///abs/path/nua.db`` (spaces allowed, raw or %-encoded) or
    ``postgresql://user@host:port/db``, or ``memory:`` (in this process only, gone at
    close: tests and the deterministic simulation). A database migrated by a newer
    opennua raises :class:`SchemaTooNew`.

    Blobs: ``blobs`` names the backend — ``file:///abs/dir`` or ``s3://bucket/prefix``
    (see ``_blobs_s3``). Without it, SQLite keeps them under ``data_dir/blobs`` (``data_dir``
    defaults to the database's directory) and PostgreSQL in the database itself, so every
    machine reads what any other wrote; blobs an older version left under
    ``data_dir/blobs`` are copied in once. The in-memory store keeps them under
    ``data_dir/blobs`` when given one, else it has none.
    """
    chosen = _blob_backend(blobs) if blobs is not None else None
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        path = _sqlite_path(url)
        private_dirs(path.parent)
        root = Path(data_dir) if data_dir is not None else path.parent
        from ._sqlite import SQLiteStore

        return await SQLiteStore.open(path, chosen or FileBlobStore(root / "blobs"))
    if scheme in ("postgresql", "postgres"):
        from ._postgres import PostgresStore

        store = await PostgresStore.open(url, chosen)
        if chosen is None and data_dir is not None:
            await _import_file_blobs(Path(data_dir) / "blobs", store.blobs)
        return store
    if scheme == "memory":
        from ._memory import MemoryStore

        if chosen is None and data_dir is not None:
            chosen = FileBlobStore(Path(data_dir) / "blobs")
        return MemoryStore(chosen)
    raise InvalidInput(
        f"unsupported store URL {url!r}: use sqlite:///path, postgresql://... or memory:"
    )


def _blob_backend(url: str) -> BlobStore:
    if url.startswith("file://"):
        parts = urlsplit(url)
        root = unquote(parts.path)
        if parts.netloc not in ("", "localhost") or not root.startswith("/"):
            raise InvalidInput(f"a file blob URL needs an absolute path: {url!r}")
        return FileBlobStore(root)
    if url.startswith("s3://"):
        from ._blobs_s3 import S3BlobStore

        return S3BlobStore.from_url(url)
    raise InvalidInput(f"unsupported blob URL {url!r}: use file:///dir or s3://bucket/prefix")


_IMPORTED = ".imported-to-database"


async def _import_file_blobs(root: Path, into: BlobStore) -> None:
    """Copy the blobs a data directory holds from before blobs moved into PostgreSQL.

    Content-addressed, so copying twice is harmless; a marker file skips the walk after
    the first complete copy. The files are left where they are.
    """
    objects = root / "sha256"
    if not objects.is_dir() or (root / _IMPORTED).exists():
        return
    old = FileBlobStore(root)
    for folder in sorted(objects.iterdir()):
        for file in sorted(folder.iterdir()):
            sha256 = folder.name + file.name
            if not await into.exists(sha256):
                await into.put(await old.read(sha256))
    (root / _IMPORTED).touch(mode=0o600)


def _sqlite_path(url: str) -> Path:
    # urlsplit would treat '#' or '?' in a file name as URL syntax; only the prefix is.
    if not url.startswith("sqlite:///"):
        raise InvalidInput(f"a SQLite URL is sqlite:///absolute/path, got {url!r}")
    raw = url[len("sqlite://") :]
    path = Path(unquote(raw) if "%" in raw else raw)
    if not path.is_absolute() or urlsplit(url).netloc:
        raise InvalidInput(f"a SQLite URL needs an absolute path, got {url!r}")
    return path
