"""The feedback desk column: the desk (examples/feedback_desk) as its own process against
the column's `nua serve`, subscribed to its deliveries, used by a reviewer over HTTP.

A turn starts as the desk starts one: a ticket submitted on the public form, then
dispatched by the reviewer (a further turn: the submitter's follow-up, dispatched). What
the desk *shows* is each of its dispatches (the ticket API's rows, which the review page
renders): the status it derives from the runtime's facts, and per input request the
options it offers or who answered. Turns the desk did not dispatch are not its to show.
The desk shows no sub-agents, artifacts, usage or trace ids: those rows assert what the
desk does show (`partial`), and the matrix marks the cells so.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, ClassVar

import httpx
from feedback_desk.db import Database
from feedback_desk.provision import EVENTS, Nua

from tests._support.polling import wait_for
from tests.conformance._drivers import Answered, Driver, View, stalled
from tests.conformance._host import DEMO, Loop, restart
from tests.e2e._proc import Server, free_port

PASSWORD = "matrix reviewer password"


def desk_status(turn: dict[str, Any]) -> str:
    """The status the desk documents for a turn's state (docs/feedback_desk.md)."""
    if turn["state"] == "queued":
        return "accepted"
    if turn["state"] == "running":
        return "working"
    if turn["state"] == "requires_action":
        return "waiting for us"
    if turn["stop_reason"] == "end_turn" and isinstance(turn.get("output"), dict):
        return "draft ready"
    return "failed"


def _request_item(request: dict[str, Any]) -> str:
    rid = request["request_id"]
    if request["status"] == "open":
        offered = ",".join(o["option_id"] for o in request["options"] or [])
        return f"request {rid}: open, options {offered}"
    by = (request.get("answered_by") or {}).get("client_id")
    return f"request {rid}: {request['outcome']} {request['option_id']} by {by}"


class DeskDriver(Driver):
    column = "feedback desk"
    partial: ClassVar[dict[str, str]] = {
        "test_todo_and_sub_agents": "the desk shows no sub-agents",
        "test_artifact_after_restart": "the desk offers no artifacts",
        "test_usage_and_trace": "the desk shows no usage or trace id",
    }

    def __init__(self, server: Server, loop: Loop) -> None:
        super().__init__(server, loop)
        # Deliveries go to the desk on this machine, and are retried quickly.
        server.args += ["--allow-private-subscriptions", "--subscription-retry-base", "0.3"]
        restart(server)
        self.dir = server.data.parent / "desk"
        self.dir.mkdir()
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        db = Database(self.dir / "desk.sqlite3")
        try:
            self.client_id = f"cli_desk{db.setting('install_id')}"
            # As the desk's own provisioning does, on the default deployment (the demo).
            created = Nua(server.url, server.token)(
                "subscription", "create", f"{self.url}/hooks/opennua",
                "--events", EVENTS, "--deployment", "default",
            )  # fmt: skip
            words = created.split()
            db.set_setting("subscription_id", next(w for w in words if w.startswith("sub_")))
            db.set_setting("webhook_secret", next(w for w in words if w.startswith("whsec_")))
        finally:
            db.close()
        self.args = [
            sys.executable, "-m", "feedback_desk", "serve", "--url", server.url,
            "--data", str(self.dir), "--port", str(port), "--deployment", "default",
            "--reviewer", f"reviewer:{PASSWORD}",
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None
        self._start()
        self.http = httpx.Client(
            base_url=self.url, timeout=60, headers={"accept": "application/json"}
        )
        done = self.http.post("/login", data={"username": "reviewer", "password": PASSWORD})
        assert done.status_code == 303, done.text
        self.tickets: dict[str, tuple[str, str]] = {}  # session id -> (ticket id, public token)

    def _start(self) -> None:
        log = (self.dir / "desk.log").open("ab")
        with log:
            env = os.environ | {"NUA_TOKEN": self.server.token}
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, env=env)

        def up() -> bool:
            assert self.proc is not None and self.proc.poll() is None, "the desk exited"
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(self.url + "/", timeout=1).status_code == 200
            return False

        wait_for(up, timeout=60, interval=0.2)

    def _stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a stopped process cannot exit
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def close(self) -> None:
        self.http.close()
        self._stop()

    def _dispatch(self, ticket_id: str) -> dict[str, Any]:
        sent = self.http.post(f"/desk/{ticket_id}/dispatch")
        assert sent.status_code == 200, sent.text
        row: dict[str, Any] = sent.json()
        return row

    def start_turn(self, sid: str | None = None, text: str = DEMO) -> str:
        if sid is None:
            made = self.http.post("/feedback", data={"title": "Matrix", "body": text})
            assert made.status_code == 201, made.text
            ticket_id, page = made.json()["ticket_id"], made.json()["public_url"]
            row = self._dispatch(ticket_id)
            self.tickets[row["session_id"]] = (ticket_id, page)
            return str(row["session_id"])
        ticket_id, page = self.tickets[sid]
        # The submitter writes again on their page; the reviewer dispatches the revision.
        with httpx.Client(base_url=self.url, timeout=60) as public:
            followed = public.post(f"{page}/reply", data={"body": text})
        assert followed.status_code == 201, followed.text
        assert self._dispatch(ticket_id)["session_id"] == sid
        return sid

    def _rows(self, sid: str) -> list[dict[str, Any]]:
        shown = self.http.get(f"/api/tickets/{self.tickets[sid][0]}")
        assert shown.status_code == 200, shown.text
        rows: list[dict[str, Any]] = shown.json()["dispatches"]
        return sorted(rows, key=lambda d: d["revision"])

    def view(self, sid: str) -> View:
        items: list[str] = []
        for row in self._rows(sid):
            items.append(f"turn {row['turn_id']}: {row['status']}")
            for rid in sorted(row["requests"]):
                items.append(_request_item(row["requests"][rid]))
        return View(state=None, items=tuple(items), usage=(), trace_ids=())

    def expected(self, state: dict[str, Any]) -> View:
        items: list[str] = []
        for turn in state["turns"]:
            if turn["trigger"].get("client_id") != self.client_id:
                continue  # another client's turn: not a dispatch of the desk's
            items.append(f"turn {turn['turn_id']}: {desk_status(turn)}")
            for rid in sorted(turn["input_requests"]):
                items.append(_request_item(turn["input_requests"][rid]))
        return View(state=None, items=tuple(items), usage=(), trace_ids=())

    def answer(self, sid: str, rid: str, option_id: str) -> Answered:
        def asked() -> dict[str, Any] | None:
            return next((r for r in self._rows(sid) if rid in r["requests"]), None)

        row: dict[str, Any] = wait_for(asked, timeout=60, interval=0.2)
        form = {"revision": str(row["revision"]), "request_id": rid, "option_id": option_id}
        done = self.http.post(f"/desk/{self.tickets[sid][0]}/answer", data=form)
        assert done.status_code in (200, 409), done.text
        return Answered(done.status_code == 200, str(done.json()["answered_by"]["client_id"]))

    def disconnect(self, sid: str) -> None:
        self._stop()

    def reconnect(self, sid: str) -> None:
        self._start()  # it reconciles its open dispatches from the API as it starts

    @contextlib.contextmanager
    def slow(self, sid: str) -> Iterator[None]:
        # A webhook receiver that stalls: deliveries back up; then it must catch up.
        with stalled(self.proc):
            yield
