"""The AG-UI column: `@ag-ui/client`'s HttpAgent under Node (`tests/protocols/`), one
agent per session on `POST /v1/agui/default`, as a frontend uses it.

A run ends when the turn waits for a person (the interrupt) or ends; a frontend that
wants to see what happened since runs the thread again with no new message (a
reconnect), and is sent the messages and shared state first. What it shows (`View`) is
its messages in its own order, the sub-agents of its shared state, and every turn's
usage and trace id from that state; `expected` projects the Host's state the same way.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

from opennua.protocols.agui import CLIENT_ID, messages
from tests._support.polling import wait_for
from tests.conformance._drivers import Answered, Driver, View
from tests.conformance._host import DEMO, Loop
from tests.e2e._proc import Server
from tests.protocols._agui import Agents, require_node


def _items(messages: list[dict[str, Any]], state: dict[str, Any]) -> tuple[str, ...]:
    """What a frontend lists: the agent's messages (not the user's, whose ids are the
    client's own until a snapshot, nor the tool results under their calls) and the
    sub-agent cards of the turn it follows."""
    shown = [m["id"] for m in messages if m["role"] not in ("user", "tool")]
    cards = [f"worker:{w['id']}" for w in state.get("subagents", [])]
    return (*shown, *cards)


def _usage(state: dict[str, Any]) -> tuple[tuple[int, int] | None, ...]:
    return tuple(
        (t["usage"]["input_tokens"], t["usage"]["output_tokens"]) for t in state.get("turns", [])
    )


class AguiDriver(Driver):
    column = "AG-UI"
    client_id = CLIENT_ID

    def __init__(self, server: Server, loop: Loop) -> None:
        super().__init__(server, loop)
        require_node()
        self.agents = Agents()
        self.threads: dict[str, str] = {}  # session id -> agent name (its thread id)
        self.pace = 0

    def close(self) -> None:
        self.agents.close()

    def _url(self) -> str:
        return f"{self.server.url}/v1/agui/default"

    def _settled(self, name: str) -> dict[str, Any]:
        return self.agents.wait(name, timeout=120)

    def start_turn(self, sid: str | None = None, text: str = DEMO) -> str:
        if sid is None:
            name = f"thread-{uuid.uuid4().hex}"
            self.agents.agent(name, self._url(), self.server.token, name)
        else:
            name = self.threads[sid]
            self._settled(name)
        self.agents.run(name, message=text, dropInterrupts=True, slow=self.pace)
        if sid is None:

            def session() -> str | None:
                state = self.agents.view(name)["state"]
                found = state.get("session_id") if isinstance(state, dict) else None
                return str(found) if found else None

            sid = wait_for(session, timeout=60)
            self.threads[sid] = name
        return sid

    def _catch_up(self, sid: str) -> dict[str, Any]:
        """Run the thread again (a reconnect) unless a run is still streaming."""
        name = self.threads[sid]
        view = self.agents.view(name)
        if not view["running"]:
            self.agents.run(name, dropInterrupts=True, slow=self.pace)
            self._settled(name)
            view = self.agents.view(name)
        return view

    def view(self, sid: str) -> View:
        shown = self._catch_up(sid)
        state = shown["state"]
        return View(
            state=None,
            items=_items(shown["messages"], state),
            usage=_usage(state),
            trace_ids=tuple(t["trace_id"] for t in state.get("turns", [])),
        )

    def expected(self, state: dict[str, Any]) -> View:
        projected = [json.loads(m.model_dump_json(by_alias=True)) for m in messages(state)]  # type: ignore[arg-type]
        turn = state["turns"][-1] if state["turns"] else None
        workers = [{"id": w} for w in turn["workers"]] if turn else []
        shared = {"subagents": workers, "turns": state["turns"]}
        return View(
            state=None,
            items=_items(projected, shared),
            usage=_usage(shared),
            trace_ids=tuple(t["trace_id"] for t in state["turns"]),
        )

    def answer(self, sid: str, rid: str, option_id: str) -> Answered:
        name = self.threads[sid]
        self._settled(name)
        pending = [i["id"] for i in self.agents.view(name)["pendingInterrupts"]]
        assert rid in pending, f"the client was not shown {rid} ({pending})"
        result = self.agents.run_to_end(name, resume={rid: {"option_id": option_id}})
        error = result["error"]
        if error is None:
            return Answered(True, self.client_id)
        assert error["code"] == "http_409", error
        resolution = json.loads(error["payload"])["resolution"]
        return Answered(False, str(resolution["answered_by"]["client_id"]))

    def disconnect(self, sid: str) -> None:
        self.agents.abort(self.threads[sid])

    def reconnect(self, sid: str) -> None:
        self._catch_up(sid)

    def read_artifact(self, sid: str, artifact_id: str) -> bytes:
        shown = self._catch_up(sid)["state"]
        assert artifact_id in [a["artifact_id"] for a in shown["artifacts"]], "not shown"
        # AG-UI carries no bytes: a frontend downloads what the shared state names.
        with self.server.client() as http:
            response = http.get(f"/v1/artifacts/{artifact_id}/content")
        assert response.status_code == 200, response.text
        return response.content

    @contextlib.contextmanager
    def slow(self, sid: str) -> Iterator[None]:
        self.pace = 50  # ms the frontend takes per event
        try:
            yield
        finally:
            self.pace = 0
