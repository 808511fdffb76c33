"""Real processes for the desk's end-to-end tests: the scripted model (a thread), `nua serve`
and the desk (`python -m feedback_desk serve`, a subprocess each), provisioned with the
`nua` CLI exactly as the demo does."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from feedback_desk import samples
from feedback_desk.db import Database
from feedback_desk.provision import Nua, provision
from feedback_desk.scripted_model import ScriptedModel

SCRIPTED = "openai:feedback-scripted"
PASSWORD = "correct horse battery staple"
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], T | None], *, timeout: float = 60, what: str = "") -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or check}")
        time.sleep(0.1)


def _healthy(url: str, proc: subprocess.Popen[bytes], log: Path, path: str) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url + path, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not come up:\n{log.read_text()[-3000:]}")


class Proc:
    """One subprocess with a log, restartable on the same port."""

    def __init__(self, args: list[str], log: Path, port: int, health: str, env: dict[str, str]):
        self.args, self.log, self.port, self.health, self.env = args, log, port, health, env
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.args, stdout=out, stderr=subprocess.STDOUT, env=os.environ | self.env
            )
        try:
            _healthy(self.url, self.proc, self.log, self.health)
        except BaseException:
            self.stop()
            raise
        return self

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


class Stack:
    """The scripted model, `nua serve`, and the desk, provisioned."""

    def __init__(
        self, root: Path, *, model_delay: float = 0.0, limit: int = 2, database: str | None = None
    ) -> None:
        self.root = root
        self.model = ScriptedModel(delay=model_delay).start()
        try:
            self._start(root, limit, database)
        except BaseException:
            self.close()  # never leave a process behind when a start fails
            raise

    def _start(self, root: Path, limit: int, database: str | None) -> None:
        nua_bin = str(Path(sys.executable).with_name("nua"))
        data = root / "nua"
        data.mkdir()
        port = free_port()
        self.server = Proc(
            [nua_bin, "serve", "--data", str(data), "--port", str(port), "--lease-ttl", "2",
             "--allow-private-subscriptions", "--subscription-retry-base", "0.3"],
            root / "serve.log", port, "/healthz", self.model.env(),
        )  # fmt: skip
        self.server.start()
        self.token = (data / "token").read_text().strip()
        self.nua = Nua(self.server.url, self.token)
        (root / "desk").mkdir()
        self.db_path: Path | str = database or root / "desk" / "desk.sqlite3"
        self.db = Database(self.db_path)
        samples.load(self.db, new=False)
        desk_port = free_port()
        self.desk = Proc(
            [sys.executable, "-m", "feedback_desk", "serve", "--url", self.server.url,
             "--data", str(root / "desk"), *(["--database", database] if database else []),
             "--port", str(desk_port), "--reviewer", f"reviewer:{PASSWORD}",
             "--background-limit", str(limit)],
            root / "desk.log", desk_port, "/", {"NUA_TOKEN": self.token},
        )  # fmt: skip
        provision(self.nua, self.db, self.desk.url, model=SCRIPTED)
        self.desk.start()

    @contextmanager
    def reviewer(self) -> Iterator[httpx.Client]:
        """A logged-in reviewer's HTTP client (JSON answers)."""
        headers = {"accept": "application/json"}
        with httpx.Client(base_url=self.desk.url, timeout=30, headers=headers) as http:
            done = http.post("/login", data={"username": "reviewer", "password": PASSWORD})
            assert done.status_code == 303, done.text
            yield http

    def opennua(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.server.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30
        )

    def submit(self, title: str, body: str, files: list[tuple[str, bytes]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
        with httpx.Client(base_url=self.desk.url, timeout=30) as http:
            sent = http.post(
                "/feedback",
                data={"title": title, "body": body, "name": "Sam", "email": "sam@example.com"},
                files=[("attachment", f) for f in files],
            )
        assert sent.status_code == 201, sent.text
        found: dict[str, Any] = sent.json()
        return found

    def wait_status(self, http: httpx.Client, ticket_id: str, status: str, revision: int = 1,
                    timeout: float = 150) -> dict[str, Any]:  # fmt: skip
        def check() -> dict[str, Any] | None:
            doc = http.get(f"/api/tickets/{ticket_id}").json()
            for d in doc["dispatches"]:
                if d["revision"] == revision and d["status"] == status:
                    found: dict[str, Any] = d
                    return found
            return None

        return wait_for(check, timeout=timeout, what=f"{ticket_id} r{revision} {status}")

    def deliveries(self) -> list[dict[str, Any]]:
        """The desk subscription's deliveries, as `nua subscription deliveries` lists them."""
        sub = self.db.setting("subscription_id")
        assert sub is not None
        listed = self.nua("subscription", "deliveries", sub, "--json", "--limit", "100")
        return [json.loads(line) for line in listed.splitlines() if line.strip()]

    def pending_result(self) -> dict[str, Any] | None:
        """A `turn.ended` delivery the desk has not taken yet, tried at least once."""
        return next(
            (d for d in self.deliveries()
             if d["event_type"] == "turn.ended" and d["state"] == "pending" and d["attempts"]),
            None,
        )  # fmt: skip

    def events(self) -> list[dict[str, Any]]:
        return self.db.all("SELECT * FROM events ORDER BY received_at")

    def close(self) -> None:
        for proc in (getattr(self, "desk", None), getattr(self, "server", None)):
            if proc is not None:
                proc.stop()
        self.model.stop()
        if (db := getattr(self, "db", None)) is not None:
            db.close()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    made = Stack(tmp_path)
    try:
        yield made
    finally:
        made.close()


PG = os.environ.get("FEEDBACK_DESK_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for the desk, dropped afterwards."""
    import psycopg

    try:
        admin = psycopg.connect(PG, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but PostgreSQL does not answer at {PG}: {exc}")
        pytest.skip(f"no PostgreSQL at {PG}")
    name = f"desk_{secrets.token_hex(4)}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(PG, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest) -> str | None:
    """The desk's database: SQLite (None: a file), or a PostgreSQL URL."""
    if request.param == "sqlite":
        return None
    url: str = request.getfixturevalue("pg_url")
    return url
