"""The ground truth of the conformance matrix: the Host's own state and history over HTTP,
and the helpers every column shares (a background event loop, one `nua serve` per column).

A cell never trusts the client it tests to say what happened: it asks the Host
(`GET /v1/sessions/{sid}` and `/actions`) and compares what the client shows with that.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests._support.polling import wait_for
from tests.e2e._proc import Server

T = TypeVar("T")

DEMO = "Write a short report"
HOST_CLIENT = "cli_host_api"


class Loop:
    """One asyncio loop on its own thread, for the async clients (opennua.client, nio).

    Playwright's sync API holds the main thread's loop while a browser is open, so async
    clients in the same module run their coroutines here instead.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 90) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def column_server(data: Path) -> Server:
    # A near-zero-delay demo: a turn runs to its approval, and then to its end, in about a
    # second; the cells wait on states, never on time. Its chunks come 5 ms apart, so the
    # final answer (15 chunks) outlasts the 50 ms delta batch and is seen streaming.
    return Server(data, step_delay="0.05", model="scripted:demo").start()


def restart(server: Server) -> None:
    """Stop `nua serve` and start it again on the same data directory and port.

    SIGTERM, and SIGKILL after 5 s: open event streams (a browser tab) hold a graceful
    shutdown, and what a cell reads after the restart was committed long before."""
    assert server.proc is not None
    server.proc.terminate()
    try:
        server.proc.wait(5)
    except subprocess.TimeoutExpired:
        server.kill9()
    server.start()


class Host:
    """The Host's facts, read over HTTP, and a second client (`HOST_CLIENT`) to act."""

    def __init__(self, server: Server) -> None:
        self.server = server

    def _http(self) -> httpx.Client:
        return self.server.client()

    def snapshot(self, sid: str) -> dict[str, Any]:
        with self._http() as http:
            body: dict[str, Any] = http.get(f"/v1/sessions/{sid}").raise_for_status().json()
        return body

    def state(self, sid: str) -> dict[str, Any]:
        state: dict[str, Any] = self.snapshot(sid)["state"]
        return state

    def history(self, sid: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        with self._http() as http:
            after = 0
            while True:
                params = {"after": after, "limit": 1000}
                page = http.get(f"/v1/sessions/{sid}/actions", params=params).json()
                out += page["actions"]
                if not page["more"]:
                    return out
                after = page["next_after"]

    def send(self, sid: str, text: str = DEMO) -> str:
        body = {"client_id": HOST_CLIENT, "content": [{"type": "text", "text": text}]}
        with self._http() as http:
            response = http.post(f"/v1/sessions/{sid}/messages", json=body)
        assert response.status_code == 202, response.text
        turn: str = response.json()["turn_id"]
        return turn

    def answer(self, sid: str, rid: str, option_id: str = "allow_once") -> httpx.Response:
        body = {"client_id": HOST_CLIENT, "option_id": option_id}
        with self._http() as http:
            return http.post(f"/v1/sessions/{sid}/input-requests/{rid}/answer", json=body)

    def open_request(self, sid: str, timeout: float = 60) -> str:
        opened = wait_for(lambda: self.state(sid)["open_input_requests"], timeout=timeout)
        rid: str = opened[0]["request_id"]
        return rid

    def settle(self, sid: str, timeout: float = 90) -> dict[str, Any]:
        """Approve every request until the session is idle; the final state."""

        def idle() -> dict[str, Any] | None:
            state = self.state(sid)
            for request in state["open_input_requests"]:
                self.answer(sid, request["request_id"])
            busy = any(t["state"] != "ended" for t in state["turns"])
            return None if busy or not state["turns"] else state

        settled: dict[str, Any] = wait_for(idle, timeout=timeout, interval=0.2)
        return settled

    def ended(self, sid: str, timeout: float = 90) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            state = self.state(sid)
            done = state["turns"] and all(t["state"] == "ended" for t in state["turns"])
            return state if done else None

        ended: dict[str, Any] = wait_for(check, timeout=timeout, interval=0.2)
        return ended
