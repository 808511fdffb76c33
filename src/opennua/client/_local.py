"""The client's local copy of a session: confirmed state plus an optimistic overlay.

The confirmed state is only ever built by the shared reducer from actions the Host
appended (or a snapshot of them), so it stays byte-identical to the server's. The user's
own messages that the Host has not confirmed yet live beside it, keyed by `intent_id`:
a renderer may show them, but they never enter the state. Each is dropped when the
authoritative `turn.started` carrying its `intent_id` arrives (or a snapshot already
contains its turn), and rolled back when the Host rejects the intent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from opennua.protocol import Action, SessionState, copy_state, initial_state, reduce


@dataclass
class PendingMessage:
    """A message the user sent that the confirmed state does not show yet."""

    intent_id: str
    content: list[dict[str, Any]]
    status: Literal["sending", "accepted"] = "sending"
    turn_id: str | None = None

    @property
    def text(self) -> str:
        return "".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")


@dataclass(frozen=True)
class RolledBack:
    """An optimistic message the Host refused; shown once so the user knows, then gone."""

    intent_id: str
    text: str
    code: str
    message: str


@dataclass
class LocalSession:
    state: SessionState = field(default_factory=initial_state)
    pending: dict[str, PendingMessage] = field(default_factory=dict)
    rolled_back: list[RolledBack] = field(default_factory=list)

    @property
    def seq(self) -> int:
        return self.state["seq"]

    def apply(self, action: Action) -> bool:
        """Reduce one action; True when it advanced the state (False for a duplicate).

        Raises `SequenceGap` (state unchanged) when actions are missing before it.
        """
        assert action.seq is not None
        if action.seq <= self.state["seq"]:
            return False
        self.state = reduce(self.state, action)
        if action.type == "turn.started" and action.intent_id is not None:
            self.pending.pop(action.intent_id, None)
        return True

    def reset(self, state: SessionState) -> None:
        """Replace the confirmed state with a snapshot (after a resync)."""
        self.state = copy_state(state)
        self._drop_confirmed()

    # -- the overlay ---------------------------------------------------------------------

    def propose(self, intent_id: str, content: list[dict[str, Any]]) -> PendingMessage:
        pending = PendingMessage(intent_id, content)
        self.pending[intent_id] = pending
        return pending

    def accept(self, intent_id: str, turn_id: str | None) -> None:
        """The Host accepted it; keep showing it until its `turn.started` is reduced."""
        pending = self.pending.get(intent_id)
        if pending is None:
            return
        pending.status = "accepted"
        pending.turn_id = turn_id
        self._drop_confirmed()

    def reject(self, intent_id: str, code: str, message: str) -> None:
        """The Host refused it (or it never got there): roll the overlay back."""
        pending = self.pending.pop(intent_id, None)
        if pending is not None:
            self.rolled_back.append(RolledBack(intent_id, pending.text, code, message))

    def pending_messages(self) -> list[PendingMessage]:
        return list(self.pending.values())

    def _drop_confirmed(self) -> None:
        # A snapshot carries no intent ids, but an accepted intent told us its turn id.
        known = {turn["turn_id"] for turn in self.state["turns"]}
        for intent_id, pending in list(self.pending.items()):
            if pending.turn_id is not None and pending.turn_id in known:
                del self.pending[intent_id]
