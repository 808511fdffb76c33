"""The chat bridge column: a real Synapse, `nua bridge matrix` as its own process, and a
person on matrix-nio. What the column shows is what the room shows, read back from the
homeserver: the progress card of each turn (after its last edit) and the request messages.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from opennua.bridge import Homeserver, delivery_id

# The card is a pure function of a turn's state: the projection the room must converge on.
from opennua.bridge._render import card
from tests._support.polling import wait_for
from tests.bridge._matrix_env import BridgeProc, Person, Synapse, from_bot, new_messages, shown
from tests.conformance._drivers import Answered, Driver, View, stalled
from tests.conformance._host import DEMO, Loop
from tests.e2e._proc import Server, free_port

USAGE = re.compile(r"^Usage: (\d+) in · (\d+) out tokens$", re.M)


def _usage(body: str) -> tuple[int, int] | None:
    found = USAGE.search(body)
    return (int(found[1]), int(found[2])) if found else None


def _lines(bodies: list[str]) -> list[str]:
    # A card's lines may repeat (three "Update plan" calls): numbered, they are items.
    return [
        f"card {n} line {i}: {line}"
        for n, b in enumerate(bodies)
        for i, line in enumerate(b.split("\n"))
    ]


class ChatDriver(Driver):
    """One room per session, a person (alice) who writes, replies and reacts in it."""

    column = "chat bridge"

    def __init__(self, server: Server, loop: Loop) -> None:
        super().__init__(server, loop)
        hs = Homeserver.prepare(server.data.parent / "synapse", free_port())
        self.synapse = Synapse(hs, hs.start(), {}, {})
        self.synapse.bot = hs.register("nua", "bot-password")
        self.synapse.users = {"alice": hs.register("alice", "alice-pw")}
        self.bot = self.synapse.bot["user_id"]

        async def person() -> Person:
            return Person(self.synapse, "alice")

        self.alice = loop.run(person())
        # alice is the workspace's owner in opennua: the bridge acts for her in the room.
        with server.client() as http:
            owner = http.get("/v1/whoami").raise_for_status().json()["principal_id"]
        member = ("--member", f"{self.alice.user_id}={owner}")
        self.bridge = BridgeProc(server, self.synapse, server.data, extra=member)  # type: ignore[arg-type]
        self.bridge.start()
        self.rooms: dict[str, str] = {}
        self.client_id = ""  # the bridge's own, learnt from the first turn it starts

    def close(self) -> None:
        self.bridge.stop()
        self.loop.run(self.alice.close())
        self.synapse.stop()

    def _session_of(self, room: str) -> str | None:
        with self.server.client() as http:
            for item in http.get("/v1/sessions").json()["items"]:
                if item.get("metadata", {}).get("matrix_room") == room:
                    return str(item["session_id"])
        return None

    def start_turn(self, sid: str | None = None, text: str = DEMO) -> str:
        if sid is None:
            room = self.loop.run(self.alice.dm(self.bot))
            self.loop.run(self.alice.say(room, text))
            sid = wait_for(lambda: self._session_of(room), timeout=60)
            assert sid is not None
            self.rooms[sid] = room
        else:
            before = self._mine(sid)
            self.loop.run(self.alice.say(self.rooms[sid], text))
            wait_for(lambda: self._mine(sid) > before, timeout=60)
        if not self.client_id:
            first = self.host.state(sid)["turns"][0]
            self.client_id = str(first["trigger"]["client_id"])
        return sid

    def _mine(self, sid: str) -> int:
        """How many of the session's turns the bridge started."""
        turns = self.host.state(sid)["turns"]
        return sum(1 for t in turns if t["trigger"]["client_id"] == self.client_id)

    def _events(self, sid: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = self.loop.run(self.alice.events(self.rooms[sid]))
        return events

    def _event_id(self, state: dict[str, Any], source: str, kind: str) -> str | None:
        # Which room event is the card of a turn: the delivery the bridge reported.
        found = state["deliveries"].get(delivery_id(state["session_id"], source, kind))
        return found["event_id"] if found else None

    def view(self, sid: str) -> View:
        state, events = self.host.state(sid), self._events(sid)
        mine = from_bot(events, self.bot)
        by_id = {e["event_id"]: e for e in mine}
        bodies = []
        for turn in state["turns"]:
            event = by_id.get(self._event_id(state, turn["turn_id"], "card") or "")
            bodies.append(shown(events, event) if event else "")
        bubbles = [
            e for e in new_messages(mine)
            if e["content"].get("msgtype") == "m.notice"
            and "m.in_reply_to" not in (e["content"].get("m.relates_to") or {})
        ]  # fmt: skip
        return View(
            state=None,
            items=(f"bubbles:{len(bubbles)}", *_lines(bodies)),
            usage=tuple(_usage(b) for b in bodies),
            trace_ids=(),  # a room shows no trace id
        )

    def expected(self, state: dict[str, Any]) -> View:
        bodies = [card(turn)[0] for turn in state["turns"]]  # type: ignore[arg-type]
        requests = sum(len(t["input_requests"]) for t in state["turns"])
        return View(
            state=None,
            items=(f"bubbles:{len(bodies) + requests}", *_lines(bodies)),
            usage=tuple(_usage(b) for b in bodies),
            trace_ids=(),
        )

    def _request_event(self, sid: str, rid: str) -> dict[str, Any]:
        def find() -> dict[str, Any] | None:
            event_id = self._event_id(self.host.state(sid), rid, "request")
            return next((e for e in self._events(sid) if e["event_id"] == event_id), None)

        event: dict[str, Any] = wait_for(find, timeout=60, interval=0.3)
        return event

    def answer(self, sid: str, rid: str, option_id: str) -> Answered:
        request = self._request_event(sid, rid)
        number = next(
            line.split(".", 1)[0]
            for line in request["content"]["body"].split("\n")
            if line.endswith(f"({option_id})")
        )
        room = self.rooms[sid]
        self.loop.run(self.alice.say(room, number, reply_to=request["event_id"]))

        def answered() -> str | None:
            text = shown(self._events(sid), request)
            return text if "Answered by" in text else None

        text: str = wait_for(answered, timeout=60, interval=0.3)
        if f"Answered by {self.alice.user_id} in chat" in text:
            return Answered(True, self.client_id)
        winner = text.split("Answered by ", 1)[1].split()[0]
        return Answered(False, winner)

    def disconnect(self, sid: str) -> None:
        self.bridge.kill9()

    def reconnect(self, sid: str) -> None:
        self.bridge.start()

    def read_artifact(self, sid: str, artifact_id: str) -> bytes:
        def file_event() -> dict[str, Any] | None:
            event_id = self._event_id(self.host.state(sid), artifact_id, "upload")
            return next((e for e in self._events(sid) if e["event_id"] == event_id), None)

        event: dict[str, Any] = wait_for(file_event, timeout=60, interval=0.3)
        assert event["content"]["msgtype"] == "m.file", event

        async def download() -> bytes:
            got = await self.alice.client.download(mxc=event["content"]["url"])
            body = getattr(got, "body", None)
            assert isinstance(body, bytes), got
            return body

        return self.loop.run(download())

    @contextlib.contextmanager
    def slow(self, sid: str) -> Iterator[None]:
        # A bridge that stalls, its event stream backing up; then it must catch up (and
        # read the room's message).
        with stalled(self.bridge.proc):
            yield
