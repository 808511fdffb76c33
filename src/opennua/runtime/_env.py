"""What the loop is given (ids, clock, workdir, limits) and what it returns (outcomes)."""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from pydantic import JsonValue

from opennua.protocol.actions import ErrorInfo
from opennua.protocol.ids import IdKind, new_id
from opennua.runtime._sandbox import Sandbox
from opennua.runtime._tools import ArtifactPort, MemoryArtifacts
from opennua.runtime._tracing import TraceScope


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
    #: USD across the execution (pydantic-ai's `genai-prices` table), sub-agents included.
    max_cost_usd: float | None = None
    #: Wall-clock time (epoch seconds, `RunEnv.wall_clock`) by which the execution ends.
    deadline: float | None = None
    max_tool_retries: int = 3  # consecutive invalid tool calls before the turn fails
    delta_batch_seconds: float = 0.05
    delta_batch_size: int = 32
    #: A full checkpoint is written once the replaced ops since the last one (counters,
    #: plans, waits, answers: `_writer.COMPACT_FACTOR`) reach twice its size and at least
    #: this much, so storage and the bytes written stay linear in the steps.
    compact_min_bytes: int = 64 * 1024
    #: Seconds the provider client waits to connect, and then for each part of the answer
    #: (the provider SDKs' own default is 600).
    model_timeout: float = 120.0
    #: Tries of one model request (the first included) before the turn fails; only rate
    #: limits, 5xx, timeouts and lost connections are tried again.
    model_attempts: int = 5
    model_backoff: float = 1.0  # seconds before the first retry; doubles for each one
    model_backoff_max: float = 30.0
    model_retry_after_max: float = 120.0  # a provider's `Retry-After` is honoured up to this


@dataclass(frozen=True)
class GatewayRoute:
    """How this attempt reaches remote MCP servers and the egress proxy: the gateway's
    base URL and the ticket that proves the execution to it. The ticket lives in memory
    only (never in a checkpoint, an action or a trace) and is never the credential of the
    remote service: the gateway injects that."""

    url: str
    ticket: str = field(repr=False)
    #: The gateway's ASGI app when it runs in this very process (`nua serve --role all`):
    #: requests then go to it without a loopback HTTP hop (the same checks, the same
    #: ticket; a parse and a socket round trip on each side less).
    app: Callable[..., Awaitable[None]] | None = field(default=None, repr=False, compare=False)
    #: The gateway's egress proxy when it runs in this very process: a connection from
    #: the sandbox is handed to it (with the ticket) instead of crossing a WebSocket.
    egress: Callable[[str, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]] | None = (
        field(default=None, repr=False, compare=False)
    )
    #: Called when the gateway refuses a call because the grant is revoked: the attempt
    #: checks the grant now (and stops) instead of at its next heartbeat.
    on_revoked: Callable[[], Awaitable[None]] | None = field(
        default=None, repr=False, compare=False
    )


@dataclass
class RunEnv:
    """Per-execution inputs: identities, the working directory, ports, time."""

    execution_id: str
    root_run_id: str
    workdir: Path
    ids: IdSource
    artifacts: ArtifactPort = field(default_factory=MemoryArtifacts)
    clock: Callable[[], float] = time.monotonic  # delta batching
    #: The environment `shell` commands get; None: the process's, scrubbed to an allowlist.
    shell_env: Mapping[str, str] | None = None
    #: How `shell` and stdio MCP servers run: confined (refused when the sandbox cannot
    #: start) or, the operator's choice, not; its limits; the egress proxy's socket.
    sandbox: Sandbox = field(default_factory=Sandbox)
    #: Model retries: the wall clock (a retry's `retry_at`), the wait, and the jitter.
    wall_clock: Callable[[], float] = time.time
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    jitter: Callable[[], float] = random.random
    #: Where this attempt's spans go (None: tracing is off, and costs nothing).
    trace: TraceScope | None = None
    #: The gateway remote (streamable HTTP) MCP servers are reached through; None: an
    #: agent with a remote server fails with `gateway_unavailable` (never reached direct).
    gateway: GatewayRoute | None = None


@dataclass(frozen=True)
class Answer:
    """A resolution of an input request: the chosen option, or the answered payload."""

    option_id: str | None = None
    payload: JsonValue = None


@dataclass(frozen=True)
class Completed:
    output: str
    usage: Mapping[str, int]
    #: The final answer as the JSON the output schema accepted; None without a schema.
    result: JsonValue = None
    structured: bool = False  # whether the agent declares an output schema


@dataclass(frozen=True)
class Suspended:
    """The execution waits for answers to `request_ids`; its checkpoint is committed."""

    request_ids: tuple[str, ...]
    step_no: int


@dataclass(frozen=True)
class Stopped:
    stop_reason: Literal["cancelled", "max_steps", "deadline_exceeded", "failed"]
    error: ErrorInfo | None
    usage: Mapping[str, int]


Outcome = Completed | Suspended | Stopped

APPROVE = "allow_once"
REJECT = "reject_once"
RETRY = "retry"
SKIP = "skip"
