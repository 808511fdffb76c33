"""Inputs and pure helpers of the intent service: the create-session intent, ids, times,
request hashes. No I/O."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field

from opennua.protocol import new_id
from opennua.protocol.actions import Id, _Frozen
from opennua.protocol.ids import IdKind

Clock = Callable[[], float]
Ids = Callable[[IdKind], str]


class CreateSession(_Frozen):
    """The intent that creates a session (no session exists yet to scope it)."""

    type: Literal["create_session"] = "create_session"
    intent_id: Id
    client_id: Id
    title: str = Field(default="", max_length=200)
    metadata: dict[str, Any] = Field(default_factory=dict)


def random_ids(clock: Clock = time.time) -> Ids:
    """Production ids: the clock's milliseconds and OS entropy."""

    def ids(kind: IdKind) -> str:
        return new_id(kind, ms=int(clock() * 1000), entropy=os.urandom(10))

    return ids


def rfc3339(now: float) -> str:
    """`ts` of an action: UTC, milliseconds, `Z` (what the protocol's Timestamp expects)."""
    moment = datetime.fromtimestamp(now, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def request_hash(intent: _Frozen) -> str:
    """Hash of the intent without its key: the same key with another body is detectable."""
    body = intent.model_dump(mode="json", exclude={"intent_id"})
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
