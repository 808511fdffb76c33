"""A real `nua serve` in a subprocess on a free port (SQLite in a temporary directory)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    url: str
    port: int
    data: Path
    proc: subprocess.Popen[bytes]
    log: IO[bytes] | None = None

    def log_text(self) -> str:
        """Everything the server printed so far (stdout and stderr)."""
        assert self.log is not None
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    @property
    def token(self) -> str:
        return (self.data / "token").read_text().strip()

    def client(self, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        return httpx.Client(base_url=self.url, headers=headers, timeout=10, **kwargs)


def serve_args(data: Path, port: int, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "opennua.cli",
        "serve",
        "--data",
        str(data),
        "--port",
        str(port),
        *extra,
    ]


@contextlib.contextmanager
def nua_serve(data: Path, *extra: str, umask: int | None = None) -> Iterator[Served]:
    port = free_port()
    env = dict(os.environ, NUA_MODEL="scripted:demo")

    def child_setup() -> None:
        if umask is not None:
            os.umask(umask)

    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            serve_args(data, port, *extra),
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=child_setup,
        )
        served = Served(f"http://127.0.0.1:{port}", port, data, proc, log)
        try:
            deadline = time.monotonic() + 30
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    raise AssertionError(log.read().decode(errors="replace"))
                try:
                    if httpx.get(served.url + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "nua serve did not become healthy"
                time.sleep(0.1)
            yield served
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
