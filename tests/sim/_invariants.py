"""What must hold after every simulated run, read from the log and the store."""

from __future__ import annotations

from collections import Counter
from typing import Any

from opennua.protocol import (
    Accepted,
    AnswerInput,
    Conflict,
    SendMessage,
    action_from_dict,
    replay,
    state_to_json,
)
from opennua.protocol.state import SessionState, Turn, Worker
from opennua.store import Execution

from ._world import World

#: The options of a `confirmation` request that run the call again.
RETRY_OPTIONS = {"retry"}
TERMINAL = {"completed", "failed", "cancelled", "deadline_exceeded", "revoked"}


async def check(world: World) -> list[str]:
    """Every broken invariant, as one line each (empty: the run is correct)."""
    db, problems = world.db, list(world.errors)
    problems += [f"fenced write committed: {v}" for v in world.fence_violations]
    logs: dict[str, list[dict[str, Any]]] = {}
    for session_id in world.sessions:
        log = logs[session_id] = await db.read(session_id, 0, 1_000_000)
        # Gapless, unique seqs; unique action ids.
        if [a["seq"] for a in log] != list(range(1, len(log) + 1)):
            problems.append(f"{session_id}: seqs are not 1..{len(log)}")
        ids = Counter(a["id"] for a in log)
        problems += [
            f"{session_id}: action {i} appended {n} times" for i, n in ids.items() if n > 1
        ]
        problems += await _executions(world, session_id, log)
        problems += await _requests(world, session_id, log)
        folded = replay(action_from_dict(a) for a in log)
        problems += [f"{session_id}: {problem}" for problem in _settled(folded)]
        final = state_to_json(folded)
        for name, (watched, _, state) in world.watchers.items():
            if watched == session_id and state_to_json(state) != final:
                problems.append(f"{name} did not converge on the replay of {session_id}'s log")
    problems += _intents(world, logs)
    return problems


def _settled(state: SessionState) -> list[str]:
    """An ended turn has nothing open: no call pending or running, no sub-agent running,
    no plan entry in progress, no stream streaming, no request waiting (issue 35), and the
    log never tried to reopen one (the reducer records that as an anomaly)."""
    problems = [f"anomaly at seq {a['seq']}: {a['reason']}" for a in state["anomalies"]]
    for turn in state["turns"]:
        if turn["state"] != "ended":
            continue
        runs: list[Turn | Worker] = [turn, *turn["workers"].values()]
        still = [
            *(
                f"call {c['tool_call_id']} {c['status']}"
                for c in turn["tool_calls"].values()
                if c["status"] in ("pending", "in_progress")
            ),
            *(
                f"worker {w['worker_run_id']} running"
                for w in turn["workers"].values()
                if w["status"] == "running"
            ),
            *(
                f"plan entry {e['id']} in progress"
                for r in runs
                for e in r["plan"]
                if e["status"] == "in_progress"
            ),
            *(
                f"message {m['message_id']} streaming"
                for m in [*turn["messages"].values(), *turn["reasoning"].values()]
                if m["status"] == "streaming"
            ),
            *(
                f"request {r['request_id']} open"
                for r in turn["input_requests"].values()
                if r["status"] == "open"
            ),
        ]
        problems += [f"turn {turn['turn_id']} ended with {item}" for item in still]
    return problems


async def _executions(world: World, session_id: str, log: list[dict[str, Any]]) -> list[str]:
    problems = []
    ttl = world.config.ttl
    state = replay(action_from_dict(a) for a in log)
    for e in await world.db.list_executions(session_id):
        # Completed or resumable: after the quiet period nothing may be left queued or
        # running. Waiting on an open request is resumable (a client whose answer's key
        # a crashed host left in flight gave up: docs/reliability.md, "stuck_in_flight").
        open_requests = await world.db.list_input_requests(
            session_id, execution_id=e.execution_id, status="open"
        )
        resumable = e.status == "waiting_input" and bool(open_requests)
        if e.status not in TERMINAL and not resumable:
            problems.append(f"{e.execution_id} still {e.status} after the world settled")
        ended = [a for a in log if a["type"] == "turn.ended" and a["turn_id"] == e.turn_id]
        if e.status in TERMINAL and len(ended) != 1:
            problems.append(f"{e.execution_id} is {e.status} with {len(ended)} turn.ended")
        # Deadlines honoured: nothing completes past its deadline (a heartbeat's slack).
        if (
            e.status == "completed"
            and e.deadline_at is not None
            and (e.finished_at or 0) > e.deadline_at + ttl
        ):
            problems.append(f"{e.execution_id} completed {e.finished_at - e.deadline_at:.1f}s late")
        if e.status == "deadline_exceeded":
            world.fired["deadline_expired"] += 1
        # Side effects: each call ran at most once per approval a person gave to run it.
        ledger = {entry.tool_call_id: entry for entry in await world.db.get_ledger(e.execution_id)}
        turn = next(t for t in state["turns"] if t["turn_id"] == e.turn_id)
        problems += await _revocation(world, e, turn)
        for call_id, call in turn["tool_calls"].items():
            if call["name"] != "charge":
                continue
            ran = world.effects.get(call_id, 0)
            retries = sum(
                1
                for r in turn["input_requests"].values()
                if r.get("reason") == "confirmation"
                and r.get("tool_call_id") == call_id
                and r.get("option_id") in RETRY_OPTIONS
            )
            if ran > 1 + retries:
                problems.append(f"{call_id} ran {ran} times ({retries} confirmed retries)")
            entry = ledger.get(call_id)
            if ran and (entry is None or entry.status not in ("completed", "unknown")):
                status = entry.status if entry else "missing"
                problems.append(f"{call_id} ran but its ledger entry is {status}")
            if call["status"] == "completed" and ran == 0:
                problems.append(f"{call_id} shown completed but never ran")
    return problems


async def _revocation(world: World, e: Execution, turn: dict[str, Any]) -> list[str]:
    """A revoked grant stops the execution within one lease TTL (its heartbeats re-check
    it): no side effect begins and nothing completes later than that."""
    grant = await world.db.get_grant(e.execution_id)
    if grant is None or grant.revoked_at is None:
        return []
    by = grant.revoked_at + world.config.ttl
    problems = [
        f"{call_id} began {began - grant.revoked_at:.1f}s after its grant was revoked"
        for call_id in turn["tool_calls"]
        for began in world.charges_begun.get(call_id, ())
        if began > by
    ]
    if e.status == "completed" and (e.finished_at or 0) > by:
        late = (e.finished_at or 0) - grant.revoked_at
        problems.append(f"{e.execution_id} completed {late:.1f}s after its grant was revoked")
    return problems


async def _requests(world: World, session_id: str, log: list[dict[str, Any]]) -> list[str]:
    problems = []
    resolved = Counter(
        a["data"]["request_id"] for a in log if a["type"] == "input_request.resolved"
    )
    for request in await world.db.list_input_requests(session_id):
        n = resolved.get(request.request_id, 0)
        if request.status == "open":
            continue
        if n != 1:
            problems.append(f"{request.request_id} is {request.status} with {n} resolutions")
    return problems


def _intents(world: World, logs: dict[str, list[dict[str, Any]]]) -> list[str]:
    problems = []
    answerers: dict[str, set[str]] = {}
    for o in world.outcomes:
        log = logs.get(o.session_id, [])
        if isinstance(o.intent, AnswerInput):
            answerers.setdefault(o.intent.request_id, set()).add(o.intent.client_id)
        if not isinstance(o.result, Accepted | Conflict):
            continue
        caused = [a for a in log if a.get("intent_id") == o.intent.intent_id]
        if isinstance(o.intent, SendMessage) and isinstance(o.result, Accepted):
            started = [a for a in caused if a["type"] == "turn.started"]
            if len(started) != 1:
                problems.append(f"message {o.intent.intent_id} accepted, {len(started)} turns")
        if isinstance(o.intent, AnswerInput):
            mine = [a for a in caused if a["type"] == "input_request.resolved"]
            if isinstance(o.result, Accepted) and len(mine) != 1:
                problems.append(f"answer {o.intent.intent_id} accepted, {len(mine)} resolutions")
            if isinstance(o.result, Conflict):
                # Every loser is told the winner.
                winner = [
                    a
                    for a in log
                    if a["type"] == "input_request.resolved"
                    and a["data"]["request_id"] == o.intent.request_id
                ]
                told = o.result.resolution.get("answered_by")
                if not winner or winner[0]["data"].get("answered_by") != told:
                    problems.append(f"answer {o.intent.intent_id} was told a wrong winner")
                if mine:
                    problems.append(f"answer {o.intent.intent_id} lost but was appended")
    if any(len(clients) > 1 for clients in answerers.values()):  # raced, in seeded order
        world.fired["reordered_answers"] += 1
    return problems
