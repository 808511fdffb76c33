"""The content-addressed blob store."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from opennua.store import BlobCorrupted, FileBlobStore, InvalidInput, NotFound, Store


def test_put_and_read_round_trip_content_addressed(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    data = b"hello artifact\n" * 1000
    ref = blobs.put_bytes(data)
    assert ref.sha256 == hashlib.sha256(data).hexdigest() and ref.size == len(data)
    assert blobs.put_bytes(data) == ref  # same bytes, same blob
    assert blobs.read_bytes(ref.sha256) == data
    assert blobs.path(ref.sha256).is_relative_to(tmp_path / "blobs")
    assert list((tmp_path / "blobs" / "tmp").iterdir()) == []


def test_corrupted_blob_is_detected_on_read(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path)
    ref = blobs.put_bytes(b"the real bytes")
    path = blobs.path(ref.sha256)
    path.write_bytes(b"the real bytez")
    with pytest.raises(BlobCorrupted) as caught:
        blobs.read_bytes(ref.sha256)
    assert caught.value.sha256 == ref.sha256
    assert caught.value.actual == hashlib.sha256(b"the real bytez").hexdigest()
    blobs.put_bytes(b"the real bytes")  # writing it again heals it
    assert blobs.read_bytes(ref.sha256) == b"the real bytes"


def test_missing_and_malformed_names(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path)
    with pytest.raises(NotFound):
        blobs.read_bytes("0" * 64)
    with pytest.raises(InvalidInput):
        blobs.read_bytes("../../etc/passwd")


def test_an_interrupted_write_leaves_no_blob_visible(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path)

    def chunks() -> Iterator[bytes]:
        yield b"first half "
        raise OSError("disk went away")

    with pytest.raises(OSError, match="disk went away"):
        blobs.put_chunks(chunks())
    assert not blobs.exists_sync(hashlib.sha256(b"first half ").hexdigest())
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


@pytest.mark.slow
def test_a_writer_killed_mid_write_never_exposes_a_partial_blob(tmp_path: Path) -> None:
    # A real process writes big blobs in a loop and is SIGKILLed mid-stream: whatever
    # is visible under sha256/ must verify, and the write that was cut off is absent.
    script = textwrap.dedent(
        """
        import os, sys, time
        from opennua.store import FileBlobStore
        blobs = FileBlobStore(sys.argv[1])
        def chunks(i):
            for k in range(64):
                yield bytes([i % 256]) * 65536
                if i == 3 and k == 32:
                    print("midway", flush=True)
                    time.sleep(60)
        for i in range(4):
            print(blobs.put_chunks(chunks(i)).sha256, flush=True)
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        done = [proc.stdout.readline().strip() for _ in range(3)]
        assert proc.stdout.readline().strip() == "midway"
        proc.kill()
    blobs = FileBlobStore(tmp_path)
    visible = sorted(
        p.parent.name + p.name for p in (tmp_path / "sha256").rglob("*") if p.is_file()
    )
    assert visible == sorted(done)
    for sha in visible:
        assert len(blobs.read_bytes(sha)) == 64 * 65536
    assert len(os.listdir(tmp_path / "tmp")) == 1  # the cut-off write, never renamed


async def test_store_exposes_its_blob_store(store: Store) -> None:
    ref = await store.blobs.put(b"bytes")
    assert await store.blobs.read(ref.sha256) == b"bytes"
