"""The Matrix bridge: a client of the Session Host that lives in chat rooms (docs/bridge.md).

Four loops, each owning one direction:

- **sync** reads the homeserver: invitations, messages (start a turn, answer a request,
  a command) and reactions (answer a request). Every intent it sends is keyed by the
  Matrix event id, so an event seen twice after a restart is one intent.
- **follow** (one per bound session) keeps the session's state with the shared reducer
  and derives what the room should show: a card per turn, a message per input request
  and its resolution, a file per artifact. Each is a delivery with a derived identity,
  queued once; card edits are throttled to one per `edit_interval`.
- **send** and **report** (`_outbox.py`) work the outbox in order, per room, using the
  delivery id as the Matrix transaction id, and tell the Host every state change.

The bridge decides no fact: turns, answers and first-writer-wins are the Host's; the
agent never waits on anything here.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.trace import TracerProvider

from opennua._common import RetryPolicy
from opennua.client import (
    ApiError,
    Client,
    ClientError,
    ConflictError,
    GoneError,
    InvalidRequestError,
    Subscription,
    connect,
    new_client_id,
)
from opennua.protocol import SessionState
from opennua.protocol.state import InputRequest, Turn

from . import _render as r
from ._answers import Choice, Refusal, from_reaction, from_text
from ._deliveries import DELIVERY_RETRY, DeliveryState, delivery_id, intent_key
from ._ledger import Binding, Ledger, Outgoing
from ._matrix import Matrix, MatrixError
from ._outbox import Outbox
from ._tracing import DeliverySpans

_log = logging.getLogger(__name__)

IF_BUSY = ("reject", "enqueue", "interrupt")


@dataclass(frozen=True)
class BridgeConfig:
    homeserver: str
    user_id: str
    #: The bot's Matrix access token (read from a file or the environment, never argv).
    token: str
    host_url: str
    host_token: str | None
    state_path: Path
    #: Matrix user id -> the principal they are in opennua. Empty: everyone in the room
    #: steers as the bridge's own principal. Otherwise only a listed person whose
    #: principal may act in the session's workspace, as the Host's members say now.
    members: Mapping[str, str] = field(default_factory=dict)
    if_busy: str = "enqueue"
    #: Seconds between two edits of one card: 2 s is at most 30 events a minute per card.
    edit_interval: float = 2.0
    sync_timeout_ms: int = 10_000
    retry: RetryPolicy = DELIVERY_RETRY


class MatrixBridge:
    def __init__(
        self,
        config: BridgeConfig,
        *,
        clock: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        self._rand = rand
        self.ledger = Ledger(config.state_path)
        client_id = self.ledger.cursor("client_id")
        if client_id is None:
            client_id = new_client_id()
            self.ledger.set_cursor("client_id", client_id)
        #: Stable across restarts: `answered_by` names the bridge the same way every time.
        self.client_id = client_id
        self.matrix = Matrix(config.homeserver, config.token)
        self.host: Client = connect(config.host_url, config.host_token, client_id=client_id)
        spans = None
        if tracer_provider is not None:
            spans = DeliverySpans(tracer_provider, self.host.execution)
        self.outbox = Outbox(
            self.ledger, self.matrix, self.host,
            retry=config.retry, client_id=client_id, clock=clock, rand=rand, spans=spans,
        )  # fmt: skip
        self._followers: dict[str, asyncio.Task[None]] = {}
        self._last_edit: dict[str, float] = {}
        self._states: dict[str, SessionState] = {}
        #: Delivery ids known to be in the ledger: most reconciles find nothing new.
        self._known: set[str] = set()
        #: Turns whose card shows their end, sent: no later action changes them.
        self._settled: set[str] = set()

    async def run(self) -> None:
        """Run until cancelled."""
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._sync_loop())
                group.create_task(self.outbox.send_loop())
                group.create_task(self.outbox.report_loop())
                for binding in self.ledger.bindings():
                    self._follow(binding)
        finally:
            for task in self._followers.values():
                task.cancel()
            await asyncio.gather(*self._followers.values(), return_exceptions=True)
            await self.matrix.aclose()
            await self.host.aclose()
            self.ledger.close()

    # -- sync: what people do in the rooms --------------------------------------------

    async def _sync_loop(self) -> None:
        since = self.ledger.cursor("since")
        failures = 0
        while True:
            try:
                body = await self.matrix.sync(since, self.config.sync_timeout_ms)
            except MatrixError as exc:
                failures += 1
                delay = self.config.retry.delay(failures, self._rand())
                _log.warning("sync failed (%s); again in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                continue
            failures = 0
            rooms = body.get("rooms", {})
            for room_id in rooms.get("invite", {}):
                with contextlib.suppress(MatrixError):
                    await self.matrix.join(room_id)
            if since is not None:
                for room_id, room in rooms.get("join", {}).items():
                    for event in room.get("timeline", {}).get("events", []):
                        await self._on_event(room_id, event)
            since = str(body["next_batch"])
            self.ledger.set_cursor("since", since)

    async def _on_event(self, room_id: str, event: dict[str, Any]) -> None:
        sender = event.get("sender")
        if sender == self.config.user_id or not isinstance(sender, str):
            return
        content = event.get("content") or {}
        try:
            if event.get("type") == "m.reaction":
                await self._on_reaction(room_id, event, content)
            elif event.get("type") == "m.room.message" and content.get("msgtype") == "m.text":
                await self._on_text(room_id, event, sender, content)
        except ClientError as exc:
            # The Host is down or refused: the person hears it; the event is not retried.
            _log.warning("event %s in %s: %s", event.get("event_id"), room_id, exc)
            await self._reply(room_id, event, f"Could not reach the agent: {exc}")
        except Exception:
            # One malformed event must not stop the bridge for every room.
            _log.exception("event %s in %s", event.get("event_id"), room_id)

    async def _on_text(
        self, room_id: str, event: dict[str, Any], sender: str, content: dict[str, Any]
    ) -> None:
        relates = content.get("m.relates_to") or {}
        if relates.get("rel_type") == "m.replace":
            return  # an edit of an earlier message is not a new one
        text = str(content.get("body", ""))
        refusal = await self._refusal(room_id, sender)
        if refusal is not None:
            await self._reply(room_id, event, refusal)
            return
        replied = (relates.get("m.in_reply_to") or {}).get("event_id")
        if isinstance(replied, str):
            target = await self._source_of(room_id, replied)
            if target is not None and target[1] == "request":
                await self._answer(room_id, event, sender, target[0], target[2], text=text)
                return
            text = _strip_reply_fallback(text)
        if text.startswith("!"):
            await self._command(room_id, event, text)
            return
        await self._start_turn(room_id, event, text)

    async def _on_reaction(
        self, room_id: str, event: dict[str, Any], content: dict[str, Any]
    ) -> None:
        relates = content.get("m.relates_to") or {}
        target = await self._source_of(room_id, str(relates.get("event_id")))
        if target is None or target[1] != "request":
            _log.info("reaction %s is not to an input request; ignored", event.get("event_id"))
            return
        sender = str(event["sender"])
        refusal = await self._refusal(room_id, sender)
        if refusal is not None:
            await self._reply(room_id, event, refusal)
            return
        key = str(relates.get("key", ""))
        await self._answer(room_id, event, sender, target[0], target[2], reaction=key)

    async def _source_of(self, room_id: str, event_id: str) -> tuple[str, str, str] | None:
        """(session, kind, source) of our delivery that became `event_id`; asked again once
        the room's send in flight is recorded (it may be that very event), then of the
        homeserver when a delivery of the room is still open: a process killed between a
        send and its record left the event in the room, and a person may answer it before
        this process sends it again."""
        found = self.ledger.source_of_event(event_id)
        if found is None:
            await self.outbox.recorded(room_id)
            found = self.ledger.source_of_event(event_id)
        if found is None and any(
            out.state.room_id == room_id for out in self.ledger.open_deliveries()
        ):
            found = await self._unrecorded_send(room_id, event_id)
        return found

    async def _unrecorded_send(self, room_id: str, event_id: str) -> tuple[str, str, str] | None:
        """The open delivery `event_id` was sent as, by the transaction id the homeserver
        keeps for this device's own events (our transaction id is the delivery id)."""
        try:
            event = await self.matrix.event(room_id, event_id)
        except MatrixError as exc:
            _log.warning("could not read event %s in %s: %s", event_id, room_id, exc)
            return None
        txn_id = (event.get("unsigned") or {}).get("transaction_id")
        if event.get("sender") != self.config.user_id or not isinstance(txn_id, str):
            return None
        out = self.ledger.get(txn_id)
        if out is None or out.state.room_id != room_id or out.source is None:
            return None
        return out.state.session_id, out.state.kind, out.source

    async def _command(self, room_id: str, event: dict[str, Any], text: str) -> None:
        words = text.split()
        if words[0] == "!if_busy" and len(words) == 2 and words[1] in IF_BUSY:
            binding = await self._binding(room_id)
            self.ledger.set_if_busy(binding.room_id, words[1])
            await self._reply(room_id, event, f"New messages while busy: {words[1]}.")
        elif words[0] == "!bind" and len(words) == 2:
            await self._bind_existing(room_id, event, words[1])
        else:
            usage = "Commands: !if_busy reject|enqueue|interrupt, !bind SESSION_ID."
            await self._reply(room_id, event, f"Unknown command {words[0]!r}. {usage}")

    async def _bind_existing(self, room_id: str, event: dict[str, Any], session_id: str) -> None:
        if self.ledger.binding(room_id) is not None:
            await self._reply(room_id, event, "This room already follows a session.")
            return
        _, state = await self.host.session(session_id).snapshot()
        binding = self.ledger.bind(
            Binding(room_id, session_id, self.config.if_busy, len(state["turns"]))
        )
        self._follow(binding)
        await self._reply(room_id, event, f"This room now follows {session_id}.")

    async def _refusal(self, room_id: str, sender: str) -> str | None:
        """Why `sender` may not steer the room's session, or None. The Host's membership
        facts decide, read afresh: a person removed from the workspace is refused at once."""
        if not self.config.members:
            return None
        principal = self.config.members.get(sender)
        member = None
        if principal is not None:  # an unlisted person needs no round trip to be refused
            workspace = await self._workspace_of(room_id)
            members = await self.host.members(workspace)
            member = next((m for m in members if m["principal_id"] == principal), None)
        if member is None:
            return f"{sender} is not a member of this session's workspace."
        if "act" not in member["permissions"]:
            return f"{sender} may follow this session but not steer it (role {member['role']})."
        return None

    async def _workspace_of(self, room_id: str) -> str:
        binding = self.ledger.binding(room_id)
        if binding is not None:
            state = self._states.get(binding.session_id)
            if state is None:
                _, state = await self.host.session(binding.session_id).snapshot()
            if state["workspace_id"] is not None:
                return state["workspace_id"]
        # An unbound room's session will be created in the bridge's first workspace.
        me = await self.host.whoami()
        return me["workspaces"][0]["workspace_id"]

    async def _binding(self, room_id: str) -> Binding:
        binding = self.ledger.binding(room_id)
        if binding is None:
            # Keyed by the room: a crash between creating and binding finds the same one.
            session = await self.host.create_session(
                f"Matrix {room_id}", {"matrix_room": room_id}, intent_id=intent_key(room_id)
            )
            binding = self.ledger.bind(Binding(room_id, session.session_id, self.config.if_busy, 0))
            self._follow(binding)
        return binding

    async def _start_turn(self, room_id: str, event: dict[str, Any], text: str) -> None:
        if not text.strip():
            return
        binding = await self._binding(room_id)
        session = self.host.session(binding.session_id)
        try:
            await session.send_message(
                text,
                if_busy=binding.if_busy,  # type: ignore[arg-type]
                intent_id=intent_key(str(event["event_id"])),
            )
        except ConflictError as exc:
            if exc.code != "session_busy":
                raise
            await self._reply(
                room_id,
                event,
                "The agent is busy with a turn and this room rejects messages meanwhile "
                "(`!if_busy enqueue` queues them).",
            )
        except InvalidRequestError as exc:
            # `/name args` names a command of the session's plugin: the Host says which
            # exist when this one does not.
            if exc.code != "unknown_command":
                raise
            await self._reply(room_id, event, f"{exc.detail[:1].upper()}{exc.detail[1:]}.")

    async def _answer(
        self,
        room_id: str,
        event: dict[str, Any],
        sender: str,
        session_id: str,
        request_id: str,
        *,
        text: str | None = None,
        reaction: str | None = None,
    ) -> None:
        state = self._states.get(session_id)
        if state is None:
            _, state = await self.host.session(session_id).snapshot()
        request = _find_request(state, request_id)
        if request is None:
            _log.warning("input request %s is not in %s; %s ignored", request_id, session_id,
                         event.get("event_id"))  # fmt: skip
            return
        if request["status"] == "resolved":
            who = self._who(request["answered_by"], request_id)
            await self._reply(room_id, event, f"Too late: this was already answered by {who}.")
            return
        if reaction is not None:
            choice = from_reaction(request, reaction)
            if choice is None:
                return
        else:
            choice = from_text(request, _strip_reply_fallback(text or ""))
        if isinstance(choice, Refusal):
            await self._reply(room_id, event, choice.message)
            return
        await self._send_answer(room_id, event, sender, session_id, request_id, choice)

    async def _send_answer(
        self,
        room_id: str,
        event: dict[str, Any],
        sender: str,
        session_id: str,
        request_id: str,
        choice: Choice,
    ) -> None:
        try:
            await self.host.session(session_id).answer(
                request_id,
                option_id=choice.option_id,
                payload=choice.payload,
                intent_id=intent_key(str(event["event_id"])),
                on_behalf_of=sender,  # every client shows who answered, not our client id
            )
        except ConflictError as exc:
            if exc.code != "input_request_resolved":
                raise
            who = self._who(exc.answered_by, request_id)
            chosen = (exc.resolution or {}).get("option_id") or (exc.resolution or {}).get(
                "payload"
            )
            await self._reply(
                room_id, event, f"Too late: {who} answered first ({chosen}). Nothing changed."
            )
            return
        except GoneError:
            await self._reply(room_id, event, "Too late: this request is closed.")
            return
        except ApiError as exc:
            await self._reply(room_id, event, f"The agent refused that answer: {exc.detail}")
            return
        self.ledger.answered(request_id, sender, str(event["event_id"]))

    def _who(self, answered_by: dict[str, Any] | Any, request_id: str) -> str:
        by = answered_by if isinstance(answered_by, dict) else {}
        if by.get("client_id") == self.client_id:
            person = by.get("on_behalf_of") or self.ledger.answerer(request_id)
            return f"{person or 'someone'} in chat"
        if by.get("on_behalf_of"):
            return f"{by['on_behalf_of']} (via {by.get('client_id') or 'another client'})"
        client = by.get("client_id") or "another client"
        return f"{client} (web UI or CLI)"

    async def _reply(self, room_id: str, event: dict[str, Any], text: str) -> None:
        """A reply to a person's event; keyed by that event, so it is sent once."""
        binding = self.ledger.binding(room_id)
        session_id = binding.session_id if binding else ""
        event_id = str(event["event_id"])
        self._enqueue(
            session_id,
            room_id,
            event_id,
            "reply",
            "m.room.message",
            r.reply_content(event_id, text),
            parent=None,
        )

    # -- follow: what the room should show -------------------------------------------

    def _follow(self, binding: Binding) -> None:
        if binding.session_id not in self._followers:
            task = asyncio.get_running_loop().create_task(self._follow_loop(binding))
            self._followers[binding.session_id] = task

    async def _follow_loop(self, binding: Binding) -> None:
        session = self.host.session(binding.session_id)
        while True:
            try:
                async with session.subscribe() as live:
                    await self._follow_live(binding, live)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                _log.warning("following %s: %s", binding.session_id, exc)
                await asyncio.sleep(1.0)

    async def _follow_live(self, binding: Binding, live: Subscription) -> None:
        wake = asyncio.Event()

        async def pump() -> None:
            async for _ in live:
                wake.set()

        pumping = asyncio.get_running_loop().create_task(pump())
        try:
            # Also on a quiet stream every `edit_interval`: the last throttled edit of a
            # burst goes out once its interval has passed.
            while not pumping.done():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), self.config.edit_interval)
                wake.clear()
                self._states[binding.session_id] = live.state
                self.reconcile(binding, live.state)
            pumping.result()
        finally:
            pumping.cancel()

    def reconcile(self, binding: Binding, state: SessionState) -> None:
        """Queue what the room lacks for `state`: derived identities make this idempotent."""
        sid = binding.session_id
        now = self._clock()
        for turn in state["turns"][binding.first_turn :]:
            self._card(binding, turn, now)
            for request in turn["input_requests"].values():
                self._request(binding, turn, request)
            for artifact in state["artifacts"].values():
                # Only a published artifact has bytes to upload; a failed one comes once
                # a retry publishes it (reconcile runs again on every change).
                if artifact["turn_id"] == turn["turn_id"] and artifact["state"] == "published":
                    content = {"artifact": dict(artifact), "body": r.artifact_message(artifact)}
                    self._enqueue(
                        sid, binding.room_id, artifact["artifact_id"], "upload",
                        "m.room.message", content, parent=None, turn=turn,
                    )  # fmt: skip

    def _card(self, binding: Binding, turn: Turn, now: float) -> None:
        sid, tid = binding.session_id, turn["turn_id"]
        card_id = delivery_id(sid, tid, "card")
        ended = turn["state"] == "ended"
        if tid in self._settled:
            return
        waited = now - self._last_edit.get(tid, 0.0)
        if card_id in self._known and not ended and waited < self.config.edit_interval:
            return  # throttled: not even rendered; most actions of a long turn end here
        body, formatted = r.card(turn)
        if self._enqueue(
            sid, binding.room_id, tid, "card", "m.room.message",
            r.text_content(body, formatted), parent=None, turn=turn,
        ):  # fmt: skip
            self._last_edit[tid] = now
            return
        last = self.ledger.latest(sid, "edit", tid) or self.ledger.get(card_id)
        if last is None or last.content.get("body") == body:
            if ended and last is not None and last.state.status == "sent":
                self._settled.add(tid)  # the card shows the end: nothing will change it
            return
        if last.state.status in ("pending", "retrying"):
            return  # one edit in flight per card: when it lands, the newest state follows
        self._last_edit[tid] = now
        # Chained on the edit before it, so the same history derives the same ids.
        source = f"{tid}/{last.state.delivery_id}/{_digest(body)}"
        self._enqueue(
            sid, binding.room_id, source, "edit", "m.room.message",
            {"body": body, "html": formatted}, parent=card_id, source=tid, turn=turn,
        )  # fmt: skip

    def _request(self, binding: Binding, turn: Turn, request: InputRequest) -> None:
        sid, rid, room = binding.session_id, request["request_id"], binding.room_id
        request_id = delivery_id(sid, rid, "request")
        if delivery_id(sid, f"{rid}/resolved", "edit") in self._known:
            return  # the request message already says how it ended
        if request["status"] == "open" and request_id in self._known:
            return  # posted (with its reactions); waiting for an answer
        body, formatted = r.request_message(request)
        self._enqueue(
            sid, room, rid, "request", "m.room.message", r.text_content(body, formatted),
            parent=None, turn=turn,
        )  # fmt: skip
        kinds = {o.get("kind") for o in r.options_of(request)}
        for key, wanted in r.REACTIONS.items():
            if kinds & set(wanted):
                self._enqueue(
                    sid, room, f"{rid}/{key}", "reaction", "m.reaction", {"key": key},
                    parent=request_id, source=rid, turn=turn,
                )  # fmt: skip
        if request["status"] == "resolved":
            by: dict[str, Any] = dict(request["answered_by"] or {})
            mine = by.get("client_id") == self.client_id
            if mine and not by.get("on_behalf_of") and self.ledger.answerer(rid) is None:
                return  # our own answer, not yet recorded: name the person next tick
            body, formatted = r.resolution_message(request, self._who(by, rid))
            self._enqueue(
                sid, room, f"{rid}/resolved", "edit", "m.room.message",
                {"body": body, "html": formatted}, parent=request_id, source=rid, turn=turn,
            )  # fmt: skip

    def _enqueue(
        self,
        session_id: str,
        room_id: str,
        key: str,
        kind: str,
        event_type: str,
        content: dict[str, Any],
        *,
        parent: str | None,
        source: str | None = None,
        turn: Turn | None = None,
    ) -> bool:
        """Queue a delivery once per (session, key, kind); True when it is new. `source`
        (default `key`) is what the room's later events are matched against; `turn`, the
        turn it renders (with tracing on, its tries are spans of that turn's trace)."""
        did = delivery_id(session_id, key, kind)
        if did in self._known:
            return False
        if turn is not None and self.outbox.spans is not None:
            # Kept with the delivery: a try after a restart still finds its turn.
            client = turn["trigger"].get("client_id") or ""
            self.ledger.set_turn(did, turn["turn_id"], turn["execution_id"], client)
        state = DeliveryState(did, session_id, room_id, kind, "pending")
        out = Outgoing(state, event_type, content, parent, source or key)
        new = self.outbox.enqueue(out)
        self._known.add(did)
        return new


def _find_request(state: SessionState, request_id: str) -> InputRequest | None:
    for turn in state["turns"]:
        if request_id in turn["input_requests"]:
            return turn["input_requests"][request_id]
    return None


def _strip_reply_fallback(text: str) -> str:
    """A reply's body quotes the message it answers as `> ` lines first; drop them."""
    lines = text.split("\n")
    while lines and lines[0].startswith(">"):
        lines.pop(0)
    return "\n".join(lines).strip()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
