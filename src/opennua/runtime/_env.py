"""What the loop is given (ids, clock, workspace, limits) and what it returns (outcomes)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from pydantic import JsonValue

from opennua.protocol.actions import ErrorInfo
from opennua.protocol.ids import IdKind, new_id
from opennua.runtime._tools import ArtifactPort, MemoryArtifacts


class IdSource(Protocol):
    def __call__(self, kind: IdKind, key: str) -> str:
        """The id of `kind` for the fact `key`; the same key must always give the same id."""


class DerivedIds:
    """Ids derived from (seed, key): a step redone after a crash gets the ids it had, and
    tests are deterministic. `ms` is the execution's acceptance time, the ULIDs' time part."""

    def __init__(self, seed: str, *, ms: int) -> None:
        self._seed = seed
        self._ms = ms

    def __call__(self, kind: IdKind, key: str) -> str:
        entropy = hashlib.sha256(f"{self._seed}\x1f{kind}\x1f{key}".encode()).digest()[:10]
        return new_id(kind, ms=self._ms, entropy=entropy)


@dataclass(frozen=True)
class Limits:
    max_steps: int = 50  # model responses across the execution, sub-agents included
    max_tokens: int | None = None  # input + output tokens across the execution
    max_tool_retries: int = 3  # consecutive invalid tool calls before the turn fails
    delta_batch_seconds: float = 0.05
    delta_batch_size: int = 32
    #: A full checkpoint is written once the steps since the last one reach its size (and
    #: at least this much), so storage and the bytes written stay linear in the steps.
    compact_min_bytes: int = 64 * 1024


@dataclass
class RunEnv:
    """Per-execution inputs: identities, the workspace, ports, the clock."""

    execution_id: str
    root_run_id: str
    workspace: Path
    ids: IdSource
    artifacts: ArtifactPort = field(default_factory=MemoryArtifacts)
    clock: Callable[[], float] = time.monotonic
    #: The environment `shell` commands get; None: the process's, scrubbed to an allowlist.
    shell_env: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Answer:
    """A resolution of an input request: the chosen option, or the answered payload."""

    option_id: str | None = None
    payload: JsonValue = None


@dataclass(frozen=True)
class Completed:
    output: str
    usage: Mapping[str, int]


@dataclass(frozen=True)
class Suspended:
    """The execution waits for answers to `request_ids`; its checkpoint is committed."""

    request_ids: tuple[str, ...]
    step_no: int


@dataclass(frozen=True)
class Stopped:
    stop_reason: Literal["cancelled", "max_steps", "failed"]
    error: ErrorInfo | None
    usage: Mapping[str, int]


Outcome = Completed | Suspended | Stopped

APPROVE = "allow_once"
REJECT = "reject_once"
RETRY = "retry"
SKIP = "skip"
