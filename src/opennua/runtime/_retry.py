"""Which model-provider failures the loop retries, after how long, and what a turn says
when it gives up. Pure: the time is passed in.

Retrying is the loop's, not the provider SDK's (the loop turns its SDK retries off), so a
client sees each retry as the turn's `model_retry` state, and a cancel interrupts the wait.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from typing import Literal

from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelConnectionError,
    ModelHTTPError,
    ModelQuotaExceededError,
    ModelRateLimitError,
    ModelRequestRejectedError,
    ModelRequestTimeout,
    ModelServerError,
    ModelTimeoutError,
    ModelUnavailableError,
)

from opennua._common import RetryPolicy
from opennua.runtime._env import Limits

FailureCode = Literal[
    "model_rate_limited", "model_unavailable", "model_timeout", "model_rejected", "model_error"
]
_SURROGATES = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class ModelFailure:
    """A failed model request: the turn error's `code` and `message` if the loop gives up,
    whether trying again may help, and how long the provider asked to wait (seconds)."""

    code: FailureCode
    message: str
    retryable: bool
    retry_after: float | None = None


def classify(exc: BaseException, *, now: float) -> ModelFailure | None:
    """The failure `exc` is, or None when it is not a provider's (a bug: let it raise).
    `now` is the wall clock, for a `Retry-After` given as an HTTP date."""
    if isinstance(exc, ModelHTTPError):
        return _http_failure(exc, now)
    if isinstance(exc, ModelRequestTimeout | ModelTimeoutError | TimeoutError):
        return ModelFailure("model_timeout", "the model did not answer in time", True)
    if not isinstance(exc, ModelAPIError):
        return None
    message = _short(str(exc))
    if isinstance(exc, ModelQuotaExceededError | ModelRequestRejectedError):
        return ModelFailure("model_rejected", message, False)
    if isinstance(exc, ModelRateLimitError):
        return ModelFailure("model_rate_limited", message, True, exc.retry_after)
    if isinstance(exc, ModelUnavailableError | ModelServerError | ModelConnectionError):
        return ModelFailure("model_unavailable", message, True, exc.retry_after)
    return ModelFailure("model_error", message, False)


def _http_failure(exc: ModelHTTPError, now: float) -> ModelFailure:
    status = exc.status_code
    try:
        text = f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        text = f"HTTP {status}"
    detail = _provider_message(exc.body)
    message = f"{text}: {detail}" if detail else text
    wait = retry_after(exc.headers, now)
    if wait is None and exc.headers is None:
        wait = exc.retry_after  # a provider that says it elsewhere than in a header
    # The provider may say outright that trying again is pointless (`x-should-retry`).
    refused = exc.provider_retry_hint is False
    if isinstance(exc, ModelQuotaExceededError):
        return ModelFailure("model_rejected", message, False)
    if status == 429:
        return ModelFailure("model_rate_limited", message, not refused, wait)
    if status == 408:
        return ModelFailure("model_timeout", message, not refused, wait)
    if status >= 500:
        return ModelFailure("model_unavailable", message, not refused, wait)
    return ModelFailure("model_rejected", message, False)


def _provider_message(body: object) -> str:
    """The human part of a provider's error body (`{"error": {"message": …}}` and kin)."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            inner = inner.get("message")
        if isinstance(inner, str):
            return _short(inner)
    return ""


def _short(text: str, limit: int = 500) -> str:
    text = _SURROGATES.sub("\ufffd", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def retry_after(headers: Mapping[str, str] | None, now: float) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds, or an HTTP date
    relative to `now`); None when absent or unreadable. Header names are lowercase."""
    if not headers:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        seconds = _number(raw_ms)
        if seconds is not None:
            return seconds / 1000
    raw = headers.get("retry-after")
    if raw is None:
        return None
    seconds = _number(raw)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # asctime dates carry no zone: they are GMT
    return max(0.0, when.timestamp() - now)


def _number(raw: str) -> float | None:
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return value if 0 <= value < math.inf else None


def retry_delay(failure: ModelFailure, retry: int, limits: Limits, jitter: float) -> float:
    """How long to wait before retry number `retry` (1 = the first). The provider's
    `Retry-After` wins, capped at `limits.model_retry_after_max`; otherwise exponential
    backoff from `limits.model_backoff`, capped at `limits.model_backoff_max`, of which a
    random half (`jitter` in [0, 1)) is dropped, so clients that failed together spread out."""
    if failure.retry_after is not None:
        return min(failure.retry_after, limits.model_retry_after_max)
    return RetryPolicy(limits.model_backoff, limits.model_backoff_max).delay(retry, jitter)
