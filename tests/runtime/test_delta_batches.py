"""Deltas on their way to the log: a batch's consecutive deltas of one message become one
action, and deltas still buffered when their message's completion commits are dropped (the
completion carries the whole text); deltas still buffered when a step commits ride in its
commit, and a message's start goes out with its first deltas in a checkpointed commit.
Fewer actions and units, the same text for every client."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opennua.protocol import actions as pa
from opennua.runtime import RuntimeEvent
from opennua.runtime._checkpoint import decode
from opennua.runtime._env import Limits
from opennua.runtime._ops import OpenOp, RunOp
from opennua.runtime._state import ExecState
from opennua.runtime._writer import StepWriter
from opennua.runtime.testing import InMemoryJournal

RUN = "run_1"


def _writer(journal: InMemoryJournal, now: list[float]) -> StepWriter:
    state = ExecState(root_run_id=RUN, snapshot_digest="sha256:x")
    return StepWriter(journal, state, Limits(), lambda: now[0])


def _text(mid: str, n: int, delta: str) -> RuntimeEvent:
    return RuntimeEvent(f"{mid}/d{n}", RUN, pa.MessageDelta(message_id=mid, delta=delta))


def _thought(mid: str, n: int, delta: str) -> RuntimeEvent:
    return RuntimeEvent(f"{mid}/r{n}", RUN, pa.ReasoningDelta(message_id=mid, delta=delta))


async def test_a_batch_of_deltas_of_one_message_is_one_action_keyed_as_its_first() -> None:
    journal, now = InMemoryJournal(), [0.0]
    writer = _writer(journal, now)
    for n, piece in enumerate(["Hel", "lo, ", "world"]):
        await writer.push(_text("m1", n, piece))
    await writer.flush()
    assert [(e.key, e.data) for e in journal.log] == [
        ("m1/d0", pa.MessageDelta(message_id="m1", delta="Hello, world"))
    ]


async def test_deltas_of_other_messages_or_kinds_stay_apart_and_in_order() -> None:
    journal, now = InMemoryJournal(), [0.0]
    writer = _writer(journal, now)
    for event in [
        _thought("m1", 0, "Think"),
        _thought("m1", 1, "ing."),
        _text("m1", 0, "An"),
        _text("m1", 1, "swer"),
        _text("m2", 0, "Other"),
        _thought("m1", 2, " More."),
    ]:
        await writer.push(event)
    await writer.flush()
    assert [(e.key, getattr(e.data, "delta", None)) for e in journal.log] == [
        ("m1/r0", "Thinking."),
        ("m1/d0", "Answer"),
        ("m2/d0", "Other"),
        ("m1/r2", " More."),
    ]


async def test_a_batch_older_than_the_window_goes_out_before_the_next_delta_joins_it() -> None:
    journal, now = InMemoryJournal(), [0.0]
    writer = _writer(journal, now)
    await writer.push(_text("m1", 0, "First "))
    now[0] += Limits().delta_batch_seconds
    await writer.push(_text("m1", 1, "batch."))  # the window closed: both go out, joined
    await writer.push(_text("m1", 2, "Second."))
    await writer.flush()
    assert [(e.key, e.data.delta) for e in journal.log] == [  # type: ignore[attr-defined]
        ("m1/d0", "First batch."),
        ("m1/d2", "Second."),
    ]


async def test_deltas_still_buffered_when_their_message_completes_are_dropped() -> None:
    journal, now = InMemoryJournal(), [0.0]
    writer = _writer(journal, now)
    await writer.push(_thought("m1", 0, "Plan."))
    await writer.push(_text("m1", 0, "Done"))
    await writer.push(_text("m2", 0, "Still going"))
    completed = [
        RuntimeEvent("m1/reasoning", RUN, pa.ReasoningCompleted(message_id="m1", text="Plan.")),
        RuntimeEvent(
            "m1/completed",
            RUN,
            pa.MessageCompleted(message_id="m1", text="Done", status="complete"),
        ),
    ]
    await writer.commit(completed)
    await writer.settle()
    assert [e.key for e in journal.log] == ["m2/d0", "m1/reasoning", "m1/completed"]


async def test_an_interrupted_message_keeps_its_deltas_they_are_all_there_is_of_it() -> None:
    journal, now = InMemoryJournal(), [0.0]
    writer = _writer(journal, now)
    await writer.push(_text("m1", 0, "Half a"))
    await writer.push(_text("m1", 1, " sentence"))
    closed = pa.MessageCompleted(message_id="m1", text="", status="interrupted")
    await writer.commit([RuntimeEvent("m1/interrupted", RUN, closed)])
    await writer.settle()
    assert [(e.key, getattr(e.data, "delta", None)) for e in journal.log] == [
        ("m1/d0", "Half a sentence"),
        ("m1/interrupted", None),
    ]


class _Units(InMemoryJournal):
    """Records each unit the writer hands over: ("emit" | "commit", its event keys)."""

    def __init__(self) -> None:
        super().__init__()
        self.units: list[tuple[str, list[str]]] = []

    async def emit(self, events: Sequence[RuntimeEvent]) -> None:
        self.units.append(("emit", [e.key for e in events]))
        await super().emit(events)

    async def commit(self, events: Sequence[RuntimeEvent], *args: Any, **kw: Any) -> None:
        self.units.append(("commit", [e.key for e in events]))
        await super().commit(events, *args, **kw)


def _done(mid: str) -> RuntimeEvent:
    data = pa.MessageCompleted(message_id=mid, text="Hi.", status="complete")
    return RuntimeEvent(f"{mid}/completed", RUN, data)


def _started(mid: str) -> RuntimeEvent:
    return RuntimeEvent(f"{mid}/started", RUN, pa.MessageStarted(message_id=mid, role="assistant"))


async def test_deltas_still_buffered_ride_in_the_commit_of_the_next_step() -> None:
    journal, now = _Units(), [0.0]
    writer = _writer(journal, now)
    await writer.push(_text("m2", 0, "Still going"))
    await writer.commit([_done("m1")])
    await writer.settle()
    assert journal.units == [("commit", ["m2/d0", "m1/completed"])]  # one unit, not two


async def test_a_message_start_and_its_first_deltas_are_one_checkpointed_commit() -> None:
    journal, now = _Units(), [0.0]
    writer = _writer(journal, now)
    writer.apply(RunOp(run=RUN, prompt="go"))
    await writer.commit([])
    await writer.settle()
    await writer.start_message(OpenOp(run=RUN), _started("m1"))
    await writer.push(_text("m1", 0, "Hel"))
    now[0] += Limits().delta_batch_seconds
    await writer.push(_text("m1", 1, "lo"))  # the window closed: out they go
    await writer.push(_text("m1", 2, " there"))
    await writer.flush()
    await writer.settle()
    assert journal.units == [
        ("commit", []),
        ("commit", ["m1/started", "m1/d0"]),  # with its op: a resume knows it began
        ("emit", ["m1/d2"]),  # later deltas need no checkpoint
    ]
    assert writer.state.runs[RUN].opened
    stored = decode(None, journal._d.steps, snapshot_digest="sha256:x", root_run_id=RUN).runs[RUN]
    assert stored.opened


async def test_a_message_whose_text_did_not_stream_starts_with_its_completion() -> None:
    journal, now = _Units(), [0.0]
    writer = _writer(journal, now)
    writer.apply(RunOp(run=RUN, prompt="go"))
    await writer.start_message(OpenOp(run=RUN), _started("m1"))
    await writer.push(_text("m1", 0, "Hi."))
    await writer.commit([_done("m1")])
    await writer.settle()
    assert journal.units == [("commit", ["m1/started", "m1/completed"])]
