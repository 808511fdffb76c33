"""The blob contract, once per backend: a local directory, the PostgreSQL database, and a
real S3-compatible server (moto in server mode, its own process)."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from opennua.store import (
    BlobCorrupted,
    BlobStore,
    FileBlobStore,
    InvalidInput,
    NotFound,
    Unavailable,
    open_store,
)

from ._s3_server import CREDENTIALS, free_port, make_bucket, s3_server

BIG = bytes(range(256)) * (10 * 1024 + 7)  # ~2.5 MiB: crosses chunk boundaries unevenly


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with s3_server() as url:
        make_bucket(url, "nua-blobs")
        yield url


@pytest.fixture
def s3_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)


Tamper = Callable[[str, bytes], Awaitable[None]]


@pytest.fixture(params=["file", pytest.param("postgres", marks=pytest.mark.postgres), "s3"])
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[BlobStore, Tamper]]:
    """A blob store, and a way to overwrite a stored blob's bytes behind its back."""
    if request.param == "file":
        files = FileBlobStore(tmp_path / "blobs")

        async def tamper_file(sha256: str, data: bytes) -> None:
            files.path(sha256).write_bytes(data)

        yield files, tamper_file
        return
    if request.param == "postgres":
        url: str = request.getfixturevalue("pg_url")
        async with await open_store(url) as store:

            async def tamper_row(sha256: str, data: bytes) -> None:
                async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                    await conn.execute("DELETE FROM blob_chunks WHERE blob = %s", (sha256,))
                    await conn.execute(
                        "INSERT INTO blob_chunks (blob, idx, data) VALUES (%s, 0, %s)",
                        (sha256, data),
                    )

            yield store.blobs, tamper_row
        return
    endpoint = request.getfixturevalue("s3_endpoint")
    request.getfixturevalue("s3_env")
    prefix = f"run-{request.node.name}".replace("[", "-").replace("]", "")
    async with await open_store(
        f"sqlite:///{tmp_path}/nua.db", blobs=f"s3://nua-blobs/{prefix}?endpoint_url={endpoint}"
    ) as store:
        import boto3

        async def tamper_object(sha256: str, data: bytes) -> None:
            client = boto3.client("s3", endpoint_url=endpoint)
            key = f"{prefix}/sha256/{sha256[:2]}/{sha256[2:]}"
            await asyncio.to_thread(client.put_object, Bucket="nua-blobs", Key=key, Body=data)
            client.close()

        yield store.blobs, tamper_object


async def test_bytes_round_trip_under_their_sha256(backend: tuple[BlobStore, Tamper]) -> None:
    blobs, _ = backend
    ref = await blobs.put(BIG)
    assert ref.sha256 == hashlib.sha256(BIG).hexdigest() and ref.size == len(BIG)
    assert await blobs.read(ref.sha256) == BIG
    assert await blobs.put(BIG) == ref  # the same bytes are the same blob
    assert await blobs.exists(ref.sha256)
    empty = await blobs.put(b"")
    assert await blobs.read(empty.sha256) == b""


async def test_streams_of_any_chunking_store_the_same_blob(
    backend: tuple[BlobStore, Tamper],
) -> None:
    blobs, _ = backend

    async def produce() -> AsyncIterator[bytes]:
        for i in range(0, len(BIG), 333_333):
            await asyncio.sleep(0)
            yield BIG[i : i + 333_333]

    streamed = await blobs.put_stream(produce())
    chunked = await blobs.put_stream(BIG[i : i + 1000] for i in range(0, 5000, 1000))
    assert streamed.sha256 == hashlib.sha256(BIG).hexdigest() and streamed.size == len(BIG)
    assert await blobs.read(streamed.sha256) == BIG
    assert await blobs.read(chunked.sha256) == BIG[:5000]


async def test_a_stream_that_fails_midway_leaves_nothing(
    backend: tuple[BlobStore, Tamper],
) -> None:
    blobs, _ = backend

    async def breaks() -> AsyncIterator[bytes]:
        yield BIG[:1_500_000]
        raise OSError("the client went away")

    with pytest.raises(OSError, match="went away"):
        await blobs.put_stream(breaks())
    assert not await blobs.exists(hashlib.sha256(BIG[:1_500_000]).hexdigest())
    assert not await blobs.exists(hashlib.sha256(BIG).hexdigest())


async def test_missing_and_malformed_names(backend: tuple[BlobStore, Tamper]) -> None:
    blobs, _ = backend
    with pytest.raises(NotFound):
        await blobs.read("0" * 64)
    assert not await blobs.exists("0" * 64)
    for bad in ("../../etc/passwd", "A" * 64, "0" * 63):
        with pytest.raises(InvalidInput):
            await blobs.read(bad)


async def test_corrupted_bytes_are_reported_never_served(
    backend: tuple[BlobStore, Tamper],
) -> None:
    blobs, tamper = backend
    ref = await blobs.put(b"the real bytes")
    await tamper(ref.sha256, b"tampered bytes")
    with pytest.raises(BlobCorrupted):
        await blobs.read(ref.sha256)


async def test_delete_is_idempotent(backend: tuple[BlobStore, Tamper]) -> None:
    blobs, _ = backend
    ref = await blobs.put(b"short-lived")
    await blobs.delete(ref.sha256)
    await blobs.delete(ref.sha256)
    assert not await blobs.exists(ref.sha256)
    with pytest.raises(NotFound):
        await blobs.read(ref.sha256)


async def test_concurrent_writers_of_the_same_bytes_make_one_blob(
    backend: tuple[BlobStore, Tamper],
) -> None:
    blobs, _ = backend
    refs = await asyncio.gather(*(blobs.put_stream([BIG]) for _ in range(8)))
    assert len(set(refs)) == 1
    assert await blobs.read(refs[0].sha256) == BIG


# -- what only the shared backends promise -----------------------------------------------


@pytest.mark.postgres
async def test_postgres_blobs_are_seen_by_every_machine(pg_url: str, tmp_path: Path) -> None:
    # Two stores with different data directories stand for two machines.
    async with (
        await open_store(pg_url, data_dir=tmp_path / "a") as a,
        await open_store(pg_url, data_dir=tmp_path / "b") as b,
    ):
        ref = await a.blobs.put(b"written on machine a")
        assert await b.blobs.read(ref.sha256) == b"written on machine a"
    assert not (tmp_path / "a" / "blobs").exists()


@pytest.mark.postgres
async def test_blobs_a_postgres_data_dir_held_before_are_copied_in(
    pg_url: str, tmp_path: Path
) -> None:
    legacy = FileBlobStore(tmp_path / "data" / "blobs")
    refs = [legacy.put_bytes(bytes([i]) * 5000) for i in range(3)]
    async with await open_store(pg_url, data_dir=tmp_path / "data") as store:
        for i, ref in enumerate(refs):
            assert await store.blobs.read(ref.sha256) == bytes([i]) * 5000
    async with await open_store(pg_url) as elsewhere:  # no data dir: still there
        assert await elsewhere.blobs.read(refs[0].sha256) == bytes([0]) * 5000


async def test_s3_blobs_are_seen_by_every_machine(
    s3_endpoint: str, s3_env: None, tmp_path: Path
) -> None:
    url = f"s3://nua-blobs/shared?endpoint_url={s3_endpoint}"
    async with (
        await open_store(f"sqlite:///{tmp_path}/a/nua.db", blobs=url) as a,
        await open_store(f"sqlite:///{tmp_path}/b/nua.db", blobs=url) as b,
    ):
        ref = await a.blobs.put(b"written on machine a")
        assert await b.blobs.read(ref.sha256) == b"written on machine a"
    assert not (tmp_path / "a" / "blobs").exists()


async def test_an_unreachable_s3_server_is_unavailable(s3_env: None, tmp_path: Path) -> None:
    url = f"s3://nua-blobs/x?endpoint_url=http://127.0.0.1:{free_port()}"
    async with await open_store(f"sqlite:///{tmp_path}/nua.db", blobs=url) as store:
        with pytest.raises(Unavailable, match="nua-blobs"):
            await store.blobs.put(b"nowhere to go")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://host/x", "unsupported blob URL"),
        ("file://relative/dir", "absolute path"),
        ("s3://", "s3://bucket/prefix"),
        ("s3://key:secret@bucket/x", "not in the --blobs URL"),
        ("s3://bucket/x?acl=public", "unknown --blobs option"),
    ],
)
async def test_bad_blob_urls_are_refused_before_anything_opens(
    url: str, message: str, tmp_path: Path
) -> None:
    with pytest.raises(InvalidInput, match=message):
        await open_store(f"sqlite:///{tmp_path}/nua.db", blobs=url)
    assert not (tmp_path / "nua.db").exists()
