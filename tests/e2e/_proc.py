"""Real `nua serve` processes for end-to-end tests: start, wait until healthy, kill -9."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    def __init__(
        self, data: Path, *, db: str | None = None, step_delay: str = "0.2", role: str = "all"
    ) -> None:
        self.data = data
        self.db = db
        self.role = role
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.step_delay = step_delay
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Server:
        args = [
            sys.executable,
            "-m",
            "opennua.cli",
            "serve",
            "--data",
            str(self.data),
            "--port",
            str(self.port),
            "--lease-ttl",
            "2",
            "--role",
            self.role,
        ]
        if self.db:
            args += ["--db", self.db]
        env = dict(os.environ, NUA_DEMO_STEP_DELAY=self.step_delay)
        self.log = self.data / f"serve-{self.role}-{time.monotonic_ns()}.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        if self.role == "supervisor":
            # No HTTP here: ready once it has announced its supervisor id.
            wait_for(lambda: b"supervisor sup_" in self.log.read_bytes(), timeout=30)
            return self
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise AssertionError(f"nua serve did not become healthy at {self.url}")

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    @property
    def token(self) -> str:
        return (self.data / "token").read_text().strip()

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=10
        )


def wait_for(predicate: Any, timeout: float = 60, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")
