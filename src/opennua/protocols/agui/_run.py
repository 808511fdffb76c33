"""One AG-UI run over our log: the events a client is sent while it follows one turn.
Pure: the server feeds it the session's state at the seq it starts from, then each
appended action; it folds them with our reducer and answers with AG-UI events.

Events are derived from the *state* of the followed turn, not translated action by action:
after every action the turn's items are compared with what this run has shown, and the
difference is sent (a message's new text, a call's result, a sub-agent that ended). So a
run that starts mid-turn (a reconnect, a second client, after a server restart) and a run
that saw the turn begin send the same thing, and an action the reducer refused (an
anomaly) sends nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from opennua.protocol import SessionState, action_from_dict, copy_state, reduce
from opennua.protocol.state import Turn

from ._patch import json_patch
from ._views import (
    FINISHED_CALLS,
    arguments,
    client_call,
    find_turn,
    interrupt,
    items,
    messages,
    reasoning_id,
    result_id,
    shared_state,
    token_usage,
    tool_result,
)

#: Where our metadata goes on an event (the key `ag-ui` is the protocol's own).
META = "opennua"


@dataclass
class _Shown:
    """What this run has sent of the followed turn's items."""

    text: dict[str, int] = field(default_factory=dict)  # message/reasoning id -> chars sent
    closed: set[str] = field(default_factory=set)  # messages, reasoning, sub-agents ended
    calls: set[str] = field(default_factory=set)  # tool calls started
    results: set[str] = field(default_factory=set)  # tool calls whose result was sent
    workers: set[str] = field(default_factory=set)  # sub-agents started in this run
    step: bool = False  # the attempt step is open


class RunStream:
    """The events of one AG-UI run that follows `turn_id` (None: the session's latest
    turn, if any) from `state`.

    `opening()` first, then `feed(action)` for every action appended after `state["seq"]`,
    in order, until `done`. The turn may not exist yet (a message just accepted): the
    run waits for it. `reconnect`: the client may hold a stale view (it reconnects, or the
    turn began before this run), so the run opens with `MESSAGES_SNAPSHOT`.
    """

    def __init__(
        self,
        state: SessionState,
        *,
        thread_id: str,
        run_id: str,
        turn_id: str | None,
        reconnect: bool,
    ) -> None:
        self.state = copy_state(state)
        self.thread_id = thread_id
        self.run_id = run_id
        if turn_id is None and state["turns"]:
            turn_id = state["turns"][-1]["turn_id"]
        self.turn_id = turn_id
        self.reconnect = reconnect
        self.done = False
        self._shown = _Shown()
        self._sent_state: dict[str, Any] = {}

    # -- the run's edges -----------------------------------------------------------------

    def opening(self) -> list[BaseEvent]:
        """RUN_STARTED, the snapshots, whatever is still open, and — when the followed
        turn already waits or ended — the run's end."""
        meta = {META: {"session_id": self.state["session_id"], "turn_id": self.turn_id}}
        events: list[BaseEvent] = [
            RunStartedEvent(
                thread_id=self.thread_id,
                run_id=self.run_id,
                protocol_version=PROTOCOL_VERSION,
                metadata=meta,
            )
        ]
        if self.reconnect:
            events.append(MessagesSnapshotEvent(messages=messages(self.state, live=True)))
        for turn in self.state["turns"]:
            if self.reconnect:
                self._seed(turn, streaming=False)
            elif turn["turn_id"] != self.turn_id:
                # A client sending a new message holds the thread up to here; what was
                # mid-stream then is left to its next reconnect's snapshot.
                self._seed(turn, streaming=True)
        self._sent_state = shared_state(self.state, self.turn_id)
        events.append(StateSnapshotEvent(snapshot=self._sent_state))
        if self.turn_id is None:  # a thread with nothing to follow
            self.done = True
            events.append(self._finished(RunFinishedSuccessOutcome()))
            return events
        body, end = self._progress(None)
        return [*events, *body, *end]

    def feed(self, action: dict[str, Any]) -> list[BaseEvent]:
        """The events one appended action causes (none once `done`)."""
        if self.done:
            return []
        self.state = reduce(self.state, action_from_dict(action))
        body, end = self._progress(action.get("turn_id"))
        return [*body, *self._delta(), *end]

    # -- internals ---------------------------------------------------------------------

    def _seed(self, turn: Turn, *, streaming: bool) -> None:
        """What the client holds counts as shown: what the opening MESSAGES_SNAPSHOT
        carries, and with `streaming` also what is mid-stream (not to be re-opened)."""
        shown = self._shown
        for kind, item_id, _owner in items(turn):
            if kind == "message":
                message = turn["messages"][item_id]
                if streaming or message["status"] != "streaming" or message["role"] == "user":
                    shown.text[item_id] = len(message["text"])
                    shown.closed.add(item_id)
            elif kind == "reasoning":
                reasoning = turn["reasoning"][item_id]
                if streaming or reasoning["status"] != "streaming":
                    shown.text[reasoning_id(item_id)] = len(reasoning["text"])
                    shown.closed.add(reasoning_id(item_id))
            elif kind == "tool_call":
                shown.calls.add(item_id)
                if turn["tool_calls"][item_id]["status"] in FINISHED_CALLS:
                    shown.results.add(item_id)
            elif kind == "worker" and (
                streaming or turn["workers"][item_id]["status"] != "running"
            ):
                shown.closed.add(item_id)  # nothing of it to open in this run

    def _delta(self) -> list[BaseEvent]:
        new = shared_state(self.state, self.turn_id)
        ops = json_patch(self._sent_state, new)
        self._sent_state = new
        return [StateDeltaEvent(delta=ops)] if ops else []

    def _progress(self, turn_id: str | None) -> tuple[list[BaseEvent], list[BaseEvent]]:
        """What changed in `turn_id`'s items (None: every turn's), and the run's last
        events when the followed turn ended or waits."""
        events: list[BaseEvent] = []
        for turn in self.state["turns"]:
            if turn_id is None or turn["turn_id"] == turn_id:
                events.extend(self._items(turn))
        followed = find_turn(self.state, self.turn_id)
        if followed is None:
            return events, []
        end = self._end(followed)
        if end:
            events.extend(self._close(followed))
            self.done = True
        elif followed["state"] == "running" and not self._shown.step:
            self._shown.step = True
            events.insert(0, StepStartedEvent(step_name=_step(followed)))
        return events, end

    def _items(self, turn: Turn) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        shown = self._shown
        own = turn["turn_id"] == self.turn_id and not self.reconnect
        for kind, item_id, owner in items(turn):
            if kind == "message":
                message = turn["messages"][item_id]
                if message["role"] == "user" and own:
                    continue  # the client sent it, under its own id
                if item_id not in shown.text:
                    shown.text[item_id] = 0
                    out.append(
                        TextMessageStartEvent(
                            message_id=item_id, role=message["role"], subagent_run_id=owner
                        )
                    )
                if len(message["text"]) > shown.text[item_id] and item_id not in shown.closed:
                    delta = message["text"][shown.text[item_id] :]
                    shown.text[item_id] = len(message["text"])
                    out.append(
                        TextMessageContentEvent(
                            message_id=item_id, delta=delta, subagent_run_id=owner
                        )
                    )
                if message["status"] != "streaming" and item_id not in shown.closed:
                    shown.closed.add(item_id)
                    out.append(TextMessageEndEvent(message_id=item_id, subagent_run_id=owner))
            elif kind == "reasoning":
                reasoning = turn["reasoning"][item_id]
                rid = reasoning_id(item_id)
                if rid not in shown.text:
                    shown.text[rid] = 0
                    out.append(ReasoningStartEvent(message_id=rid, subagent_run_id=owner))
                    out.append(ReasoningMessageStartEvent(message_id=rid, subagent_run_id=owner))
                if len(reasoning["text"]) > shown.text[rid] and rid not in shown.closed:
                    delta = reasoning["text"][shown.text[rid] :]
                    shown.text[rid] = len(reasoning["text"])
                    out.append(
                        ReasoningMessageContentEvent(
                            message_id=rid, delta=delta, subagent_run_id=owner
                        )
                    )
                if reasoning["status"] != "streaming" and rid not in shown.closed:
                    shown.closed.add(rid)
                    out.append(ReasoningMessageEndEvent(message_id=rid, subagent_run_id=owner))
                    out.append(ReasoningEndEvent(message_id=rid, subagent_run_id=owner))
            elif kind == "tool_call":
                call = turn["tool_calls"][item_id]
                if item_id not in shown.calls:
                    shown.calls.add(item_id)
                    out.append(
                        ToolCallStartEvent(
                            tool_call_id=item_id,
                            tool_call_name=call["name"],
                            parent_message_id=item_id,
                            subagent_run_id=owner,
                        )
                    )
                    out.append(
                        ToolCallArgsEvent(
                            tool_call_id=item_id, delta=arguments(call), subagent_run_id=owner
                        )
                    )
                    out.append(ToolCallEndEvent(tool_call_id=item_id, subagent_run_id=owner))
                if call["status"] in FINISHED_CALLS and item_id not in shown.results:
                    shown.results.add(item_id)
                    out.append(
                        ToolCallResultEvent(
                            message_id=result_id(item_id),
                            tool_call_id=item_id,
                            content=tool_result(call),
                            role="tool",
                            subagent_run_id=owner,
                        )
                    )
            elif kind == "worker":
                out.extend(self._worker(turn, item_id))
        return out

    def _worker(self, turn: Turn, worker_id: str) -> list[BaseEvent]:
        worker = turn["workers"][worker_id]
        shown = self._shown
        if worker_id in shown.closed:
            return []
        out: list[BaseEvent] = []
        if worker_id not in shown.workers:
            shown.workers.add(worker_id)
            parent = worker["parent_run_id"]
            out.append(
                SubagentStartedEvent(
                    subagent_run_id=worker_id,
                    name=worker["name"],
                    description=worker["task"],
                    parent_tool_call_id=worker["parent_tool_call_id"],
                    parent_subagent_run_id=parent if parent in shown.workers else None,
                )
            )
        if worker["status"] == "completed":
            shown.closed.add(worker_id)
            out.append(
                SubagentFinishedEvent(
                    subagent_run_id=worker_id,
                    result=worker["summary"],
                    outcome=SubagentFinishedSuccessOutcome(),
                )
            )
        elif worker["status"] != "running":
            shown.closed.add(worker_id)
            out.append(
                SubagentErrorEvent(
                    subagent_run_id=worker_id,
                    message=worker["summary"] or f"the sub-agent was {worker['status']}",
                    code=worker["status"],
                )
            )
        return out

    def _end(self, turn: Turn) -> list[BaseEvent]:
        """The run's last event, when the turn ended or waits for a person."""
        if turn["state"] == "ended":
            reason = turn["stop_reason"]
            if reason == "end_turn":
                return [self._finished(RunFinishedSuccessOutcome(), turn, result=turn["output"])]
            if reason == "cancelled":
                return [self._finished(RunFinishedCancelledOutcome(), turn)]
            error = turn["error"] or {"code": reason or "failed", "message": f"the turn {reason}"}
            usage = token_usage(turn)
            return [RunErrorEvent(message=error["message"], code=error["code"], usage=usage)]
        open_requests = [r for r in turn["input_requests"].values() if r["status"] == "open"]
        if turn["state"] == "requires_action" and open_requests:
            # A call of the client's own tool was sent as TOOL_CALL_START/ARGS/END: the run
            # ends, the client runs the tool and sends its result in a new run.
            asked = [r for r in open_requests if not client_call(turn, r)]
            if not asked:
                return [self._finished(RunFinishedSuccessOutcome(), turn)]
            interrupts = [interrupt(turn, request) for request in asked]
            outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
            return [self._finished(outcome, turn)]
        return []

    def _close(self, followed: Turn) -> list[BaseEvent]:
        """Close what the run opened and is still open: a run ends with nothing open (the
        followed turn's sub-agents wait with it; other turns' go on past this run)."""
        out: list[BaseEvent] = []
        shown = self._shown
        waiting = [
            r["request_id"] for r in followed["input_requests"].values() if r["status"] == "open"
        ]
        for turn in self.state["turns"]:
            for kind, item_id, owner in items(turn):
                if kind == "message" and item_id in shown.text and item_id not in shown.closed:
                    shown.closed.add(item_id)
                    out.append(TextMessageEndEvent(message_id=item_id, subagent_run_id=owner))
                elif kind == "reasoning":
                    rid = reasoning_id(item_id)
                    if rid in shown.text and rid not in shown.closed:
                        shown.closed.add(rid)
                        out.append(ReasoningMessageEndEvent(message_id=rid, subagent_run_id=owner))
                        out.append(ReasoningEndEvent(message_id=rid, subagent_run_id=owner))
            ours = turn is followed and waiting
            for worker_id in reversed(list(turn["workers"])):  # the innermost first
                if worker_id in shown.workers and worker_id not in shown.closed:
                    shown.closed.add(worker_id)
                    outcome = SubagentFinishedSuspendedOutcome(
                        interrupt_ids=waiting if ours else None
                    )
                    out.append(SubagentFinishedEvent(subagent_run_id=worker_id, outcome=outcome))
        if shown.step:
            shown.step = False
            out.append(StepFinishedEvent(step_name=_step(followed)))
        return out

    def _finished(self, outcome: Any, turn: Turn | None = None, result: Any = None) -> BaseEvent:
        return RunFinishedEvent(
            thread_id=self.thread_id,
            run_id=self.run_id,
            outcome=outcome,
            result=result,
            usage=token_usage(turn) if turn is not None else None,
        )


def _step(turn: Turn) -> str:
    return f"turn {turn['turn_id']}"
