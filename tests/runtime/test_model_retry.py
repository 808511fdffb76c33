"""Model-provider failures against a real (fake) OpenAI-compatible server on a socket: the loop
retries 429/5xx/timeouts/dropped streams with backoff and `Retry-After`, visibly (the turn's
`model_retry` state), gives up with a code that names the cause, and never duplicates a
message. Time is injected: the waits are recorded, never slept."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.exceptions import ModelHTTPError, ModelQuotaExceededError
from pydantic_ai.models import override_allow_model_requests

from opennua.runtime import Completed, Limits, Outcome, Stopped, default_agent, resolve_model
from opennua.runtime._env import Limits as _Limits
from opennua.runtime._retry import ModelFailure, classify, retry_after, retry_delay
from opennua.runtime.testing import InMemoryJournal
from tests.runtime.fixtures.provider import Provider, answer, broken, error, provider, slow
from tests.runtime.helpers import make_loop

NOW = 1_764_403_200.0  # 2025-11-29T08:00:00Z, the wall clock the loop is given


@pytest.fixture
def server() -> Iterator[Provider]:
    with provider() as p:
        yield p


class Waits:
    """The injected sleep: records each wait and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


async def _run(
    server: Provider, tmp_path: Path, limits: Limits | None = None
) -> tuple[Outcome, InMemoryJournal, Waits]:
    model = resolve_model(
        "openai:gpt-4o-mini", env={"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "sk-test"}
    )
    waits = Waits()
    journal = InMemoryJournal()
    env = {"sleep": waits, "wall_clock": lambda: NOW, "jitter": lambda: 0.5}
    loop = make_loop(
        default_agent("openai:gpt-4o-mini"), journal, tmp_path, model, limits=limits, env=env
    )
    with override_allow_model_requests(True):
        outcome = await loop.run("Say hello")
    return outcome, journal, waits


def _retry_states(journal: InMemoryJournal) -> list[Any]:
    return [
        e.data.model_retry.model_dump(mode="json") if e.data.model_retry else None  # type: ignore[attr-defined]
        for e in journal.log
        if e.type == "turn.state"
    ]


def _messages(journal: InMemoryJournal) -> list[tuple[str, str, str]]:
    return [
        (e.type, e.data.message_id, getattr(e.data, "status", ""))  # type: ignore[attr-defined]
        for e in journal.log
        if e.type in ("message.started", "message.completed")
    ]


async def test_429_with_retry_after_then_503_then_success(server: Provider, tmp_path: Path) -> None:
    server.replies = [
        error(429, "Rate limit reached for requests", {"Retry-After": "7"}),
        error(503, "The server is overloaded"),
        answer("Hello ", "there."),
    ]
    outcome, journal, waits = await _run(server, tmp_path)
    assert isinstance(outcome, Completed) and outcome.output == "Hello there."
    assert len(server.requests) == 3  # the SDK did not retry on its own
    # Retry-After is honoured; then exponential backoff (2 s for the 2nd retry, half of it
    # jittered away at random: 0.5 gives 1.5 s).
    assert waits.delays == [7.0, 1.5]
    assert _retry_states(journal) == [
        {
            "attempt": 1,
            "retry_at": "2025-11-29T08:00:07.000Z",
            "error": {
                "code": "model_rate_limited",
                "message": "429 Too Many Requests: Rate limit reached for requests",
            },
        },
        {
            "attempt": 2,
            "retry_at": "2025-11-29T08:00:01.500Z",
            "error": {
                "code": "model_unavailable",
                "message": "503 Service Unavailable: The server is overloaded",
            },
        },
        None,  # the retried request answered
    ]
    # Nothing had streamed: one message, waiting for the model the whole time, then answered.
    (started, mid, _), (completed, same, status) = _messages(journal)
    assert (started, completed, status, mid == same) == (
        "message.started",
        "message.completed",
        "complete",
        True,
    )
    # The clearing state comes before the answer (its deltas join its completion).
    order = [e.type for e in journal.log]
    cleared = order.index("turn.state", order.index("turn.state") + 2)
    assert cleared < order.index("message.completed")


async def test_retry_after_as_an_http_date_and_capped(server: Provider, tmp_path: Path) -> None:
    server.replies = [
        error(429, "slow down", {"Retry-After": formatdate(NOW + 12, usegmt=True)}),
        error(429, "slow down", {"Retry-After": "86400"}),
        answer("ok"),
    ]
    outcome, _, waits = await _run(server, tmp_path)
    assert isinstance(outcome, Completed)
    assert waits.delays == [12.0, 120.0]  # a day is capped at Limits.model_retry_after_max


async def test_gives_up_after_n_tries_with_a_code_naming_the_cause(
    server: Provider, tmp_path: Path
) -> None:
    server.replies = [error(503, "down")] * 3
    outcome, journal, waits = await _run(server, tmp_path, Limits(model_attempts=3))
    assert isinstance(outcome, Stopped) and outcome.stop_reason == "failed"
    assert outcome.error is not None and outcome.error.code == "model_unavailable"
    assert outcome.error.message == "503 Service Unavailable: down"
    assert len(server.requests) == 3 and waits.delays == [0.75, 1.5]
    assert [s["attempt"] for s in _retry_states(journal)] == [1, 2]
    # No text ever came: no message was started, so none is left open.
    assert _messages(journal) == []


@pytest.mark.parametrize(
    ("status", "code"), [(400, "model_rejected"), (401, "model_rejected"), (404, "model_rejected")]
)
async def test_a_non_retryable_4xx_fails_at_once(
    server: Provider, tmp_path: Path, status: int, code: str
) -> None:
    server.replies = [error(status, "no")]
    outcome, journal, waits = await _run(server, tmp_path)
    assert isinstance(outcome, Stopped) and outcome.error is not None
    assert outcome.error.code == code and outcome.error.message.startswith(str(status))
    assert len(server.requests) == 1 and waits.delays == [] and _retry_states(journal) == []


async def test_a_stream_that_breaks_off_is_closed_and_retried_as_a_new_message(
    server: Provider, tmp_path: Path
) -> None:
    server.replies = [broken("Hel", "lo wor"), answer("Hello ", "world.")]
    # Each delta its own batch: what streamed of both messages reaches the log.
    outcome, journal, waits = await _run(server, tmp_path, Limits(delta_batch_seconds=0))
    assert isinstance(outcome, Completed) and outcome.output == "Hello world."
    assert len(waits.delays) == 1
    # What streamed stays with the first message, closed `interrupted`, as after a crash;
    # the retry is a new message: no text is doubled in either.
    messages = _messages(journal)
    assert [m[0] for m in messages] == [
        "message.started",
        "message.completed",
        "message.started",
        "message.completed",
    ]
    assert messages[1][2] == "interrupted" and messages[3][2] == "complete"
    assert messages[0][1] == messages[1][1] != messages[2][1] == messages[3][1]
    deltas: dict[str, str] = {}
    for e in journal.log:
        if e.type == "message.delta":
            deltas[e.data.message_id] = deltas.get(e.data.message_id, "") + e.data.delta  # type: ignore[attr-defined]
    assert deltas == {messages[0][1]: "Hello wor", messages[2][1]: "Hello world."}
    state = _retry_states(journal)
    assert state[0]["error"]["code"] == "model_unavailable" and state[1:] == [None]


async def test_the_request_timeout_is_the_limits_and_a_timeout_is_retried(
    server: Provider, tmp_path: Path
) -> None:
    # The limit leaves room for a loaded CI machine to answer the second request in time.
    server.replies = [slow(4.0, answer("late")), answer("on time")]
    outcome, journal, waits = await _run(
        server, tmp_path, Limits(model_timeout=1.5, model_attempts=2)
    )
    assert isinstance(outcome, Completed) and outcome.output == "on time"
    assert len(waits.delays) == 1 and len(server.requests) == 2
    assert _retry_states(journal)[0]["error"]["code"] == "model_timeout"
    server.replies = [slow(2.0, answer("late"))]
    outcome, _, _ = await _run(server, tmp_path, Limits(model_timeout=0.3, model_attempts=1))
    assert isinstance(outcome, Stopped) and outcome.error is not None
    assert outcome.error.code == "model_timeout"


def test_the_default_timeout_is_well_under_the_sdks_600_seconds() -> None:
    limits = Limits()
    assert limits.model_timeout == 120.0 and limits.model_attempts == 5


async def test_cancel_interrupts_the_wait(server: Provider, tmp_path: Path) -> None:
    cancel = asyncio.Event()

    async def sleep(seconds: float) -> None:
        cancel.set()
        await asyncio.Event().wait()  # a long wait; only cancel ends it

    model = resolve_model(
        "openai:gpt-4o-mini", env={"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "k"}
    )
    server.replies = [error(429, "later", {"Retry-After": "3600"})]
    journal = InMemoryJournal()
    loop = make_loop(
        default_agent("openai:gpt-4o-mini"),
        journal,
        tmp_path,
        model,
        env={"sleep": sleep, "wall_clock": lambda: NOW},
    )
    with override_allow_model_requests(True):
        outcome = await asyncio.wait_for(loop.run("x", cancel=cancel), 5)
    assert isinstance(outcome, Stopped) and outcome.stop_reason == "cancelled"
    assert _messages(journal) == []  # no text came: no message to close


# -- the rules, without a server ---------------------------------------------------------------


def test_retry_after_forms() -> None:
    assert retry_after({"retry-after": "7"}, NOW) == 7.0
    assert retry_after({"retry-after": "1.5"}, NOW) == 1.5
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}, NOW) == 0.25
    assert retry_after({"retry-after": formatdate(NOW + 30, usegmt=True)}, NOW) == 30.0
    assert retry_after({"retry-after": formatdate(NOW - 30, usegmt=True)}, NOW) == 0.0
    assert retry_after({"retry-after": "soon"}, NOW) is None
    assert retry_after({"retry-after": "-1"}, NOW) is None
    assert retry_after({}, NOW) is None and retry_after(None, NOW) is None


def test_backoff_doubles_up_to_its_cap_with_jitter() -> None:
    limits = _Limits(model_backoff=1.0, model_backoff_max=8.0)
    failure = ModelFailure("model_unavailable", "x", True)
    assert [retry_delay(failure, n, limits, 0.0) for n in (1, 2, 3, 4, 5)] == [
        0.5,
        1.0,
        2.0,
        4.0,
        4.0,
    ]
    assert retry_delay(failure, 5, limits, 0.999999) == pytest.approx(8.0, rel=1e-5)
    asked = dataclasses.replace(failure, retry_after=3.0)
    assert retry_delay(asked, 5, limits, 0.3) == 3.0


def test_what_is_not_a_provider_failure_is_not_retried() -> None:
    assert classify(ValueError("a bug"), now=NOW) is None
    assert classify(RuntimeError("ALLOW_MODEL_REQUESTS"), now=NOW) is None
    quota = ModelHTTPError.for_category(ModelQuotaExceededError, status_code=429, model_name="m")
    assert classify(quota, now=NOW) == ModelFailure(
        "model_rejected", "429 Too Many Requests", False
    )
    refused = ModelHTTPError(503, "m", None, headers={"x-should-retry": "false"})
    failure = classify(refused, now=NOW)
    assert failure is not None and not failure.retryable
