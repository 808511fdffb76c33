"""``open_store(url)``: pick the backend from the URL, migrate, return a ready Store."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ._base import Store
from ._blobs import BlobStore
from ._errors import InvalidInput


async def open_store(url: str, *, data_dir: str | os.PathLike[str] | None = None) -> Store:
    """Open (and migrate) the store at ``url``.

    ``sqlite:///abs/path/nua.db`` (spaces allowed, raw or %-encoded) or
    ``postgresql://user@host:port/db``. Blobs go under ``data_dir/blobs``; for SQLite
    ``data_dir`` defaults to the database's directory. A database migrated by a newer
    opennua raises :class:`SchemaTooNew`.
    """
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        path = _sqlite_path(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        root = Path(data_dir) if data_dir is not None else path.parent
        from ._sqlite import SQLiteStore

        return await SQLiteStore.open(path, BlobStore(root / "blobs"))
    if scheme in ("postgresql", "postgres"):
        from ._postgres import PostgresStore

        blobs = BlobStore(Path(data_dir) / "blobs") if data_dir is not None else None
        return await PostgresStore.open(url, blobs)
    raise InvalidInput(f"unsupported store URL {url!r}: use sqlite:///path or postgresql://...")


def _sqlite_path(url: str) -> Path:
    # urlsplit would treat '#' or '?' in a file name as URL syntax; only the prefix is.
    if not url.startswith("sqlite:///"):
        raise InvalidInput(f"a SQLite URL is sqlite:///absolute/path, got {url!r}")
    raw = url[len("sqlite://") :]
    path = Path(unquote(raw) if "%" in raw else raw)
    if not path.is_absolute() or urlsplit(url).netloc:
        raise InvalidInput(f"a SQLite URL needs an absolute path, got {url!r}")
    return path
