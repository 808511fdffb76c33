"""What the runtime reports: execution facts, before the Host gives them a place in a session.

A runtime event carries a protocol payload and a `key` that is deterministic within its
execution (run, step, ordinal), so the supervisor's projector derives the same action id when a
resumed attempt re-emits a fact and the log deduplicates it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from opennua.protocol.actions import TYPE_OF_DATA


@dataclass(frozen=True, slots=True)
class RuntimeEvent:
    key: str
    run_id: str
    data: BaseModel

    @property
    def type(self) -> str:
        return TYPE_OF_DATA[type(self.data)]
