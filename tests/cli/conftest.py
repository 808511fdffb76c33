"""A real `nua serve` for the CLI's tests, and a way to invoke `nua` in-process."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from opennua.cli import app
from tests._support.polling import wait_for
from tests.e2e._proc import Server


@dataclass
class Nua:
    """`nua …` against one server, configured only through its data directory."""

    server: Server

    def env(self, **extra: str | None) -> dict[str, str | None]:
        # NUA_URL/NUA_TOKEN unset: the CLI must find both in the data directory.
        base: dict[str, str | None] = {
            "NUA_DATA": str(self.server.data),
            "NUA_URL": None,
            "NUA_TOKEN": None,
            "NUA_CLIENT_ID": None,
            "COLUMNS": "200",
        }
        return base | extra

    def __call__(self, *args: str, input: str | None = None, **env: str | None) -> Result:
        return CliRunner().invoke(app, list(args), env=self.env(**env), input=input)

    def http(self) -> httpx.Client:
        return self.server.client()

    def state(self, sid: str) -> dict[str, Any]:
        with self.http() as client:
            body: dict[str, Any] = client.get(f"/v1/sessions/{sid}").json()["state"]
            return body

    def open_request(self, sid: str) -> str:
        opened = wait_for(lambda: self.state(sid)["open_input_requests"], timeout=30)
        return str(opened[0]["request_id"])

    def session_titled(self, title: str) -> str:
        def find() -> str | None:
            with self.http() as client:
                items = client.get("/v1/sessions").json()["items"]
            return next((i["session_id"] for i in items if i["title"] == title), None)

        return str(wait_for(find, timeout=30))

    def answer_when_open(
        self, sid: str | None = None, *, title: str = "", client_id: str = "cli_bg"
    ) -> threading.Thread:
        """Answer `allow_once` from another client as soon as the request opens (in the
        session `sid`, or in the one titled `title` once it exists)."""

        def answer() -> None:
            session_id = sid or self.session_titled(title)
            rid = self.open_request(session_id)
            with self.http() as client:
                client.post(
                    f"/v1/sessions/{session_id}/input-requests/{rid}/answer",
                    json={"client_id": client_id, "option_id": "allow_once"},
                )

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        return thread


@pytest.fixture(scope="module")
def nua(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nua]:
    server = Server(tmp_path_factory.mktemp("cli"), step_delay="0.02").start()
    try:
        yield Nua(server)
    finally:
        server.stop()


@pytest.fixture
def offline(tmp_path: Path) -> Nua:
    """A Nua whose data directory has no server behind it."""
    return Nua(Server(tmp_path))
