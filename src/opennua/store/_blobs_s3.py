"""Blobs in S3-compatible object storage: ``--blobs s3://bucket/prefix``.

An object appears in S3 only once its upload completed, so a failed or crashed writer
leaves nothing under the blob's key. The key is the sha256, so the bytes must be known
before the upload starts: a stream is spooled (in memory up to a few MiB, then on disk)
while it is hashed. Credentials, region and endpoint come from boto3's standard chain
(``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ``~/.aws/…``), never from the URL, so no
secret ends up in a command line or a log; ``?endpoint_url=`` and ``?region=`` may be given
for a server that is not AWS. boto3 is synchronous: calls run in worker threads.
"""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
from collections.abc import AsyncIterable, Callable, Iterable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ._blobs import BlobRef, BlobStore, checked_sha256, iterate, verified
from ._errors import InvalidInput, NotFound, Unavailable

_SPOOL_IN_MEMORY = 8 << 20


class S3BlobStore(BlobStore):
    def __init__(self, client: Any, bucket: str, prefix: str) -> None:
        self._client = client
        self._bucket = bucket
        self._prefix = prefix.strip("/")
        # Uploads in progress by sha256: a second writer of the same bytes in this process
        # waits for the first instead of sending them again.
        self._uploading: dict[str, asyncio.Future[None]] = {}

    @classmethod
    def from_url(cls, url: str) -> S3BlobStore:
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc:
            raise InvalidInput(f"not an S3 blob URL {url!r}: use s3://bucket/prefix")
        if parts.username or parts.password:
            raise InvalidInput("put S3 credentials in the environment, not in the --blobs URL")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        unknown = set(query) - {"endpoint_url", "region"}
        if unknown:
            raise InvalidInput(f"unknown --blobs option(s): {', '.join(sorted(unknown))}")
        import boto3

        client = boto3.client(
            "s3", endpoint_url=query.get("endpoint_url"), region_name=query.get("region")
        )
        return cls(client, parts.netloc, parts.path)

    def _key(self, sha256: str) -> str:
        name = f"sha256/{sha256[:2]}/{sha256[2:]}"
        return f"{self._prefix}/{name}" if self._prefix else name

    async def put(self, data: bytes) -> BlobRef:
        sha256 = hashlib.sha256(data).hexdigest()
        await self._upload_once(
            sha256,
            lambda: self._client.put_object(Bucket=self._bucket, Key=self._key(sha256), Body=data),
        )
        return BlobRef(sha256, len(data))

    async def put_stream(self, chunks: AsyncIterable[bytes] | Iterable[bytes]) -> BlobRef:
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY) as spool:
            digest, size = hashlib.sha256(), 0
            async for chunk in iterate(chunks):
                spool.write(chunk)
                digest.update(chunk)
                size += len(chunk)
            sha256 = digest.hexdigest()
            spool.seek(0)
            await self._upload_once(
                sha256, lambda: self._client.upload_fileobj(spool, self._bucket, self._key(sha256))
            )
        return BlobRef(sha256, size)

    async def _upload_once(self, sha256: str, upload: Callable[[], object]) -> None:
        while (pending := self._uploading.get(sha256)) is not None:
            await asyncio.shield(pending)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._uploading[sha256] = done  # before the first await: the check above is ours
        try:
            if not await self.exists(sha256):
                await self._call(upload)
        finally:
            del self._uploading[sha256]
            done.set_result(None)

    async def read(self, sha256: str) -> bytes:
        checked_sha256(sha256)
        try:
            response = await self._call(
                self._client.get_object, Bucket=self._bucket, Key=self._key(sha256)
            )
        except NotFound as exc:
            raise NotFound("blob", sha256) from exc
        data: bytes = await asyncio.to_thread(response["Body"].read)
        return verified(sha256, data)

    async def exists(self, sha256: str) -> bool:
        checked_sha256(sha256)
        try:
            await self._call(self._client.head_object, Bucket=self._bucket, Key=self._key(sha256))
        except NotFound:
            return False
        return True

    async def delete(self, sha256: str) -> None:
        checked_sha256(sha256)
        await self._call(self._client.delete_object, Bucket=self._bucket, Key=self._key(sha256))

    async def close(self) -> None:
        await asyncio.to_thread(self._client.close)

    async def _call(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return await asyncio.to_thread(method, *args, **kwargs)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in {"404", "NoSuchKey", "NotFound"}:
                raise NotFound("blob", kwargs.get("Key", "")) from exc
            raise Unavailable(f"S3 bucket {self._bucket!r}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise Unavailable(f"S3 bucket {self._bucket!r}: {exc}") from exc
