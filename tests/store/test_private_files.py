"""The store's files are its owner's alone, whatever the process umask (issue 12,
hardening): the SQLite database and its -wal/-shm 0600, blob folders 0700, blobs and
their temp files 0600."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from opennua.store import FileBlobStore, Unavailable, open_store

from .conftest import action


@pytest.fixture
def umask_zero() -> Iterator[None]:
    old = os.umask(0)  # the worst case: everything made world-writable unless asked not to
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_new_sqlite_store_is_private_whatever_the_umask(
    tmp_path: Path, umask_zero: None
) -> None:
    data = tmp_path / "new" / "data dir"
    db = data / "nua.db"
    async with await open_store(f"sqlite:///{db}") as store:
        await store.create_session("ses_a", created_at=1.0)
        assert await store.append("ses_a", [action("ses_a", 1)]) == [1]
        assert await store.read("ses_a")  # a reader connection has opened it too
        ref = await store.blobs.put(b"an artifact")
        for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            assert _mode(path) == 0o600, path
        blob = store.blobs.path(ref.sha256)
        assert _mode(blob) == 0o600
        for folder in (tmp_path / "new", data, data / "blobs", data / "blobs" / "tmp"):
            assert _mode(folder) == 0o700, folder
        for folder in (data / "blobs" / "sha256", blob.parent):
            assert _mode(folder) == 0o700, folder


async def test_an_existing_readable_database_is_made_private(
    tmp_path: Path, umask_zero: None
) -> None:
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o755)
    db = folder / "old.db"
    with closing(sqlite3.connect(db)) as conn:  # as a version before this one left it
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE t (x)")
        conn.commit()
        os.chmod(db, 0o644)
        assert _mode(Path(f"{db}-wal")) == 0o644
        async with await open_store(f"sqlite:///{db}") as store:
            await store.create_session("ses_a", created_at=1.0)
            for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
                assert _mode(path) == 0o600, path
    assert _mode(folder) == 0o755  # a folder it did not make is left as it was


def test_blob_folders_and_files_are_private_and_old_folders_are_tightened(
    tmp_path: Path, umask_zero: None
) -> None:
    root = tmp_path / "blobs"
    (root / "tmp").mkdir(parents=True, mode=0o777)  # made by an older version
    blobs = FileBlobStore(root)
    refs = [blobs.put_bytes(bytes([i]) * 100) for i in range(3)]
    assert _mode(root / "tmp") == 0o700 and _mode(root / "sha256") == 0o700
    for ref in refs:
        path = blobs.path(ref.sha256)
        assert _mode(path) == 0o600 and _mode(path.parent) == 0o700

    def chunks() -> Iterator[bytes]:
        yield b"half"
        (part,) = (root / "tmp").iterdir()  # the temp file, while it is written
        assert _mode(part) == 0o600
        raise OSError("stop")

    with pytest.raises(OSError, match="stop"):
        blobs.put_chunks(chunks())


async def test_a_database_path_that_cannot_be_opened_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "a folder.db").mkdir()
    with pytest.raises(Unavailable, match="cannot open"):
        await open_store(f"sqlite:///{tmp_path}/a folder.db")
