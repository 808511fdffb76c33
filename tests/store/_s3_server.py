"""A real S3-compatible server for tests: moto's server mode, as its own process."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def s3_server() -> Iterator[str]:
    """Start `moto_server` on a free loopback port; yield its endpoint URL."""
    port = free_port()
    exe = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen(
        [str(exe), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **CREDENTIALS},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{url}/moto-api/", timeout=1)
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def make_bucket(endpoint: str, bucket: str) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, **_client_credentials())
    client.create_bucket(Bucket=bucket)
    client.close()


def _client_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_DEFAULT_REGION"],
    }
