"""Dispatch and the runtime's facts: the one place the desk talks to opennua, and only
through `opennua.client`.

- **Once per revision.** A ticket revision's dispatch row is written, with the prompt the
  context policy built and an idempotency key from ticket id + revision, *before* anything
  is sent. Sending is `send_message(prompt, intent_id=key)`: a retry — after a lost
  response, a crash, a second click — sends the same intent with the same key and the
  runtime answers with the execution it already accepted.
- **Statuses come from the runtime.** A dispatch's status is derived from the turn's facts
  (a delivery's action, or the session's state read back): queued → accepted, running →
  working, requires_action → waiting for us, ended with a result → draft ready, ended
  otherwise → failed. Each fact carries its seq; an older one never overwrites a newer.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opennua.client import Client, ConflictError, connect

from feedback_desk.db import Database, now
from feedback_desk.policy import Attachment, build_context


@dataclass
class Runtime:
    """Where the desk's agent runs: the server, the desk's token and the deployment."""

    url: str
    token: str
    deployment: str = "feedback-desk"
    #: Tests hand a transport that loses a response, to prove a retry finds the execution.
    transport: Any = None
    _client: Client | None = field(default=None, repr=False)

    def client(self, install_id: str) -> Client:
        if self._client is None:
            # A stable client id: the idempotency check compares whole intents, client id
            # included, so a retry after a restart must look exactly like the first try.
            self._client = connect(
                self.url, self.token, client_id=f"cli_desk{install_id}", transport=self.transport
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _attachments(db: Database, ticket_id: str, revision: int) -> list[Attachment]:
    return [
        Attachment(a["attachment_id"], a["filename"], a["media_type"], a["size"], a["data"])
        for a in db.attachments(ticket_id, revision)
    ]


def prepare(db: Database, ticket_id: str) -> dict[str, Any]:
    """The dispatch row of the ticket's current revision, created with its context if new."""
    ticket = db.ticket(ticket_id)
    if ticket is None:
        raise KeyError(ticket_id)
    revision = int(ticket["revision"])
    found = db.dispatch(ticket_id, revision)
    if found is not None:
        return found
    follow_up = None
    if revision > 1:
        message = next(m for m in db.messages(ticket_id) if m["revision"] == revision)
        follow_up = message["body"]
    context = build_context(ticket, _attachments(db, ticket_id, revision), follow_up=follow_up)
    key = f"fd-{db.setting('install_id')}-{ticket_id}-r{revision}"
    db.run(
        "INSERT INTO dispatches (ticket_id, revision, idempotency_key, prompt, context,"
        " status, dispatched_at, updated_at) VALUES (?, ?, ?, ?, ?, 'dispatching', ?, ?)"
        " ON CONFLICT DO NOTHING",
        ticket_id,
        revision,
        key,
        context.prompt,
        json.dumps(context.record),
        now(),
        now(),
    )
    made = db.dispatch(ticket_id, revision)
    assert made is not None
    return made


async def dispatch(db: Database, runtime: Runtime, ticket_id: str) -> dict[str, Any]:
    """Dispatch the ticket's current revision, once: a second call sends the same intent
    again only if the first one's answer was never recorded, and gets the same execution."""
    return await send(db, runtime, prepare(db, ticket_id))


async def send(db: Database, runtime: Runtime, row: dict[str, Any]) -> dict[str, Any]:
    """Send a prepared dispatch row's intent, unless its answer is already recorded."""
    if row["turn_id"]:
        return row
    ticket_id = row["ticket_id"]
    install = str(db.setting("install_id"))
    client = runtime.client(install)
    ticket = db.ticket(ticket_id)
    assert ticket is not None
    session_id = ticket["session_id"]
    if not session_id:
        session = await client.create_session(
            f"Ticket {ticket_id}",
            {"desk": install, "ticket_id": ticket_id},
            deployment=runtime.deployment,
            intent_id=f"fd-{install}-{ticket_id}-session",
        )
        session_id = session.session_id
        db.run("UPDATE tickets SET session_id = ? WHERE ticket_id = ?", session_id, ticket_id)
    accepted = await client.session(session_id).send_message(
        row["prompt"], intent_id=row["idempotency_key"]
    )
    _, state = await client.session(session_id).snapshot()
    db.update_dispatch(
        ticket_id,
        row["revision"],
        session_id=session_id,
        turn_id=accepted.ids["turn_id"],
        execution_id=accepted.ids["execution_id"],
        plugin=state.get("plugin"),
    )
    # The status is the runtime's: derived from the state just read, not assumed.
    apply_state(db, ticket_id, row["revision"], state)
    found = db.dispatch(ticket_id, row["revision"])
    assert found is not None
    return found


# -- facts → statuses -------------------------------------------------------------------


def status_of_turn(turn: dict[str, Any] | None) -> str:
    if turn is None or turn["state"] == "queued":
        return "accepted"
    if turn["state"] == "running":
        return "working"
    if turn["state"] == "requires_action":
        return "waiting for us"
    if turn["stop_reason"] == "end_turn" and isinstance(turn.get("output"), dict):
        return "draft ready"
    return "failed"


def apply_state(db: Database, ticket_id: str, revision: int, state: Mapping[str, Any]) -> None:
    """Record what the session's state (read through the API) says about this dispatch."""
    row = db.dispatch(ticket_id, revision)
    if row is None or not row["turn_id"] or state["seq"] <= row["last_seq"]:
        return
    turn = next((t for t in state["turns"] if t["turn_id"] == row["turn_id"]), None)
    status = status_of_turn(turn)
    fields: dict[str, Any] = {"status": status, "last_seq": state["seq"]}
    if turn is not None:
        fields["requests"] = {rid: _request(r) for rid, r in turn["input_requests"].items()}
    if turn is not None and turn["state"] == "requires_action":
        open_requests = [
            turn["input_requests"][r["request_id"]]
            for r in state["open_input_requests"]
            if r["turn_id"] == turn["turn_id"]
        ]
        fields["waiting_prompt"] = open_requests[0]["prompt"] if open_requests else None
    if status in ("draft ready", "failed") and turn is not None:
        fields["output"] = turn.get("output")
        fields["error"] = turn.get("error")
    db.update_dispatch(ticket_id, revision, **fields)


def apply_event(db: Database, payload: dict[str, Any]) -> str:
    """Apply one verified delivery; returns what happened (`applied`, `stale`, `unknown`).

    The status follows the newest seq only. A request is kept per request id whatever
    order its deliveries arrive in (an `opened` behind a newer `turn.state` still shows
    the question; a `resolved` is never undone by its `opened`)."""
    data = payload["data"]
    action = data["action"]
    row = db.dispatch_by_turn(action.get("turn_id") or "")
    if row is None:
        return "unknown"
    kind = action["type"]
    fields: dict[str, Any] = {}
    if kind in ("input_request.opened", "input_request.resolved"):
        fields["requests"] = _merged(row["requests"], action["data"], kind)
        fields["waiting_prompt"] = next(
            (r["prompt"] for r in fields["requests"].values() if r["status"] == "open"), None
        )
    if action["seq"] <= row["last_seq"]:
        if fields:
            db.update_dispatch(row["ticket_id"], row["revision"], **fields)
        return "stale"
    fields["last_seq"] = action["seq"]
    if kind == "turn.ended":
        outcome = data.get("outcome") or {}
        good = outcome.get("stop_reason") == "end_turn" and isinstance(outcome.get("output"), dict)
        fields |= {
            "status": "draft ready" if good else "failed",
            "output": outcome.get("output"),
            "error": outcome.get("error"),
        }
    elif kind == "input_request.opened":
        fields["status"] = "waiting for us"
    elif kind in ("input_request.resolved", "execution.attempt_started"):
        fields["status"] = "working"  # an attempt runs the turn (docs/protocol.md)
    elif kind == "turn.state":
        fields["status"] = status_of_turn({"state": action["data"]["state"]})
    else:
        return "ignored"
    db.update_dispatch(row["ticket_id"], row["revision"], **fields)
    return "applied"


def _merged(
    requests: dict[str, dict[str, Any]], data: Mapping[str, Any], kind: str
) -> dict[str, dict[str, Any]]:
    rid = data["request_id"]
    known = requests.get(rid, {})
    if kind == "input_request.opened":
        # What the opening says (prompt, options) under what a resolution already said.
        merged = {**data, "status": "open"} | {k: v for k, v in known.items() if v is not None}
    else:
        merged = {**known, **data, "status": "resolved"}
    return requests | {rid: _request(merged)}


def _request(found: Mapping[str, Any]) -> dict[str, Any]:
    """What the desk keeps of an input request: the question, the options it offers (none:
    a free-form question, perhaps with the answers its schema allows), and once resolved
    the option chosen or the answer given, and who answered (the Host's `answered_by`)."""
    return {
        "request_id": found["request_id"],
        "prompt": found.get("prompt", ""),
        "options": [
            {"option_id": o["option_id"], "name": o["name"]} for o in found.get("options") or []
        ],
        # A free-form question whose schema names its answers: the desk offers them.
        "choices": _choices(found.get("response_schema")),
        "status": found["status"],
        "outcome": found.get("outcome"),
        "option_id": found.get("option_id"),
        "payload": found.get("payload"),
        "answered_by": found.get("answered_by"),
    }


def _choices(schema: Any) -> list[str]:
    """The answers a response schema allows when it lists them (`enum` of strings)."""
    enum = schema.get("enum") if isinstance(schema, dict) else None
    if not isinstance(enum, list) or not all(isinstance(v, str) for v in enum):
        return []
    return list(enum)


@dataclass(frozen=True)
class Answer:
    """How a reviewer's answer ended: won, or lost to `answered_by` (who answered first)."""

    won: bool
    answered_by: dict[str, Any] | None


async def answer(
    db: Database,
    runtime: Runtime,
    row: dict[str, Any],
    request_id: str,
    who: str,
    *,
    option_id: str | None = None,
    text: str | None = None,
) -> Answer:
    """Answer an input request of a dispatch's turn as reviewer `who`, through the client:
    with one of its options, or (a free-form question) with `text`. First writer wins at
    the Host: a reviewer who lost is told who won. Either way the desk then records the
    request as the Host's state has it, not as it guessed."""
    client = runtime.client(str(db.setting("install_id")))
    session = client.session(row["session_id"])
    try:
        resolution = await session.answer(
            request_id, option_id=option_id, payload=text, on_behalf_of=who
        )
        outcome = Answer(True, dict(resolution["answered_by"]))
    except ConflictError as lost:
        if lost.answered_by is None:  # not a lost race: the turn moved on otherwise
            raise
        outcome = Answer(False, dict(lost.answered_by))
    _, state = await session.snapshot()
    apply_state(db, row["ticket_id"], row["revision"], state)
    return outcome


async def reconcile(db: Database, runtime: Runtime) -> int:
    """After downtime: every dispatch not final is read back from the API (and one whose
    answer was never recorded is sent again, with its key). Returns how many changed."""
    changed = 0
    client = runtime.client(str(db.setting("install_id")))
    for row in db.open_dispatches():
        before = (row["status"], row["last_seq"])
        if not row["turn_id"]:
            await send(db, runtime, row)
        else:
            _, state = await client.session(row["session_id"]).snapshot()
            apply_state(db, row["ticket_id"], row["revision"], state)
        after = db.dispatch(row["ticket_id"], row["revision"])
        changed += after is not None and (after["status"], after["last_seq"]) != before
    return changed


async def consume(db: Database, runtime: Runtime, *, limit: int) -> list[str]:
    """Background consumption, one pass: dispatch the oldest undispatched revisions while
    fewer than `limit` dispatches are open. The rest wait in the desk (backpressure)."""
    capacity = limit - len(db.open_dispatches())
    if capacity <= 0:
        return []
    waiting = db.all(
        "SELECT t.ticket_id FROM tickets t LEFT JOIN dispatches d"
        " ON d.ticket_id = t.ticket_id AND d.revision = t.revision"
        " WHERE d.ticket_id IS NULL AND t.closed = 0 ORDER BY t.seq LIMIT ?",
        capacity,
    )
    sent = [r["ticket_id"] for r in waiting]
    await asyncio.gather(*(dispatch(db, runtime, t) for t in sent))
    return sent
