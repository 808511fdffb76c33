"""Real processes for the bridge tests: Synapse, `nua serve`, the bridge, and a person.

The person is a `matrix-nio` client, as a phone app would be; everything they see is
read back from the homeserver, never from the bridge.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import nio

from opennua.bridge import Homeserver
from tests._support.polling import until
from tests.server._serve_proc import Served

T = TypeVar("T")


@dataclass
class Synapse:
    hs: Homeserver
    proc: subprocess.Popen[bytes]
    bot: dict[str, str]
    users: dict[str, dict[str, str]]

    def stop(self) -> None:
        Homeserver.stop(self.proc)

    def start(self) -> None:
        self.proc = self.hs.start()


@dataclass
class BridgeProc:
    """`nua bridge matrix` as its own process; kill -9 and start it again at will."""

    served: Served
    synapse: Synapse
    dir: Path
    extra: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    logs: list[Path] = field(default_factory=list)
    #: The workspace the bridge's sessions are in, and each person's principal there.
    workspace: str = ""
    principals: dict[str, str] = field(default_factory=dict)

    @property
    def state(self) -> Path:
        return self.dir / "bridge.db"

    def start(self) -> None:
        token_file = self.dir / "bot.token"
        token_file.write_text(self.synapse.bot["access_token"])
        self.starts += 1
        log = self.dir / f"bridge-{self.starts}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable, "-m", "opennua.cli", "--data", str(self.served.data),
                    "bridge", "matrix", "--homeserver", self.synapse.hs.url,
                    "--user", self.synapse.bot["user_id"], "--token-file", str(token_file),
                    "--state", str(self.state), "--edit-interval", "1", *self.extra,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.logs)


class Person:
    """A Matrix user on a nio client."""

    def __init__(self, synapse: Synapse, name: str) -> None:
        login = synapse.users[name]
        self.user_id = login["user_id"]
        self.client = nio.AsyncClient(synapse.hs.url, self.user_id, device_id=login["device_id"])
        self.client.access_token = login["access_token"]
        self.client.user_id = self.user_id

    async def close(self) -> None:
        await self.client.close()

    async def dm(self, bot: str) -> str:
        created = await self.client.room_create(is_direct=True, invite=[bot])
        assert isinstance(created, nio.RoomCreateResponse), created
        room_id = created.room_id

        async def bot_joined() -> bool:
            members = await self.client.joined_members(room_id)
            assert isinstance(members, nio.JoinedMembersResponse), members
            return bot in {m.user_id for m in members.members}

        await until(bot_joined, 30, interval=0.3, what="the bot never joined")
        return room_id

    async def say(self, room_id: str, text: str, reply_to: str | None = None) -> str:
        content: dict[str, Any] = {"msgtype": "m.text", "body": text}
        if reply_to is not None:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        sent = await self.client.room_send(room_id, "m.room.message", content)
        assert isinstance(sent, nio.RoomSendResponse), sent
        return str(sent.event_id)

    async def react(self, room_id: str, event_id: str, key: str) -> str:
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        sent = await self.client.room_send(room_id, "m.reaction", content)
        assert isinstance(sent, nio.RoomSendResponse), sent
        return str(sent.event_id)

    async def events(self, room_id: str) -> list[dict[str, Any]]:
        """Every event of the room, oldest first, as the homeserver has them."""
        out: list[dict[str, Any]] = []
        start: str | None = None
        while True:
            page = await self.client.room_messages(room_id, start=start, limit=500)
            assert isinstance(page, nio.RoomMessagesResponse), page
            out += [e.source for e in page.chunk]
            if not page.chunk or page.end is None or page.end == start:
                break
            start = page.end
        return list(reversed(out))


def from_bot(events: list[dict[str, Any]], bot: str) -> list[dict[str, Any]]:
    return [
        e for e in events if e["sender"] == bot and e["type"] in ("m.room.message", "m.reaction")
    ]


def new_messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages that are not edits (what a room shows as separate bubbles)."""
    return [
        e
        for e in events
        if e["type"] == "m.room.message"
        and (e["content"].get("m.relates_to") or {}).get("rel_type") != "m.replace"
    ]


def edits_of(events: list[dict[str, Any]], event_id: str) -> list[dict[str, Any]]:
    return [
        e
        for e in events
        if (e["content"].get("m.relates_to") or {}).get("rel_type") == "m.replace"
        and e["content"]["m.relates_to"]["event_id"] == event_id
    ]


def shown(events: list[dict[str, Any]], event: dict[str, Any]) -> str:
    """What a client shows for `event`: its body after the last edit."""
    edits = edits_of(events, event["event_id"])
    return str(edits[-1]["content"]["m.new_content"]["body"] if edits else event["content"]["body"])


def demo_env(delay: float) -> dict[str, str]:
    return {"NUA_DEMO_STEP_DELAY": str(delay), **os.environ}


# -- reading a bridged session ---------------------------------------------------------


def session_of(served: Served, room_id: str) -> str:
    with served.client() as client:
        for item in client.get("/v1/sessions").json()["items"]:
            if item.get("metadata", {}).get("matrix_room") == room_id:
                return str(item["session_id"])
    return ""


def session_state(served: Served, sid: str) -> dict[str, Any]:
    with served.client() as client:
        state: dict[str, Any] = client.get(f"/v1/sessions/{sid}").json()["state"]
        return state


async def request_message(alice: Person, room: str, bot: str) -> dict[str, Any]:
    async def find() -> dict[str, Any] | None:
        events = await alice.events(room)
        for e in new_messages(from_bot(events, bot)):
            if e["content"]["body"].startswith("✋"):
                return e
        return None

    return await until(find, 60, interval=0.3, what="no input request message")


async def turn_ended(served: Served, sid: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        state = session_state(served, sid)
        turns = state["turns"]
        return state if turns and turns[-1]["state"] == "ended" else None

    return await until(check, 90, interval=0.3, what="the turn never ended")


async def deliveries_settled(served: Served, sid: str) -> dict[str, Any]:
    """The state once every delivery is sent and the card shows the end."""

    async def check() -> dict[str, Any] | None:
        state = session_state(served, sid)
        deliveries = state["deliveries"].values()
        done = deliveries and all(d["status"] == "sent" for d in deliveries)
        return state if done and state["turns"][-1]["state"] == "ended" else None

    return await until(check, 90, interval=0.3, what="deliveries never all became sent")
