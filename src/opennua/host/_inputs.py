"""Pure helpers of the intent service: ids, times, request hashes. No I/O."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from opennua.protocol import new_id
from opennua.protocol.ids import IdKind
from opennua.store import DeploymentRecord, GrantRecord, Transaction

Clock = Callable[[], float]
Ids = Callable[[IdKind], str]


def random_ids(clock: Clock = time.time) -> Ids:
    """Production ids: the clock's milliseconds and OS entropy."""

    def ids(kind: IdKind) -> str:
        return new_id(kind, ms=int(clock() * 1000), entropy=os.urandom(10))

    return ids


def request_hash(intent: BaseModel) -> str:
    """Hash of the intent without its key: the same key with another body is detectable."""
    body = intent.model_dump(mode="json", exclude={"intent_id"})
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Actor:
    """Who an intent is from, as the server authenticated them (the Host decides no
    permission: it records who acted, and under which grant a turn it starts runs)."""

    principal_id: str
    workspace_id: str | None = None
    #: The grant an execution this intent starts runs under (its execution id is filled
    #: in by the Host), recorded in the same unit as the execution.
    grant: GrantRecord | None = None


#: Writes a trigger's own fact into the unit that accepts its execution:
#: `(tx, session_id, turn_id, execution_id)`.
RecordTrigger = Callable[[Transaction, str, str, str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class AutomatedRun:
    """A turn a schedule or a webhook starts, as `SessionHost.start_automated` takes it.

    `principal_id` is the deployment's (whose rights the run has); `trigger` says what
    caused it and grants nothing.
    """

    key: str
    client_id: str
    workspace_id: str
    deployment: str
    principal_id: str
    trigger: dict[str, Any]
    prompt: str
    title: str = ""
    session_id: str | None = None
    grant: GrantRecord | None = None
    record: RecordTrigger | None = None
    #: The deployment as it was read to find `principal_id`: the Host resolves the new
    #: session's snapshot from it rather than read it a second time.
    deployment_record: DeploymentRecord | None = None
