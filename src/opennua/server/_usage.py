"""Usage and cost: totals (`GET /v1/usage`, what `nua usage` prints) and the same rows
over time (`GET /v1/usage/series`, what the web UI charts), from one aggregation so the
two can never disagree on a number.

Every `usage.recorded` action counts once, attributed to the execution principal, the
workspace, the model or the session's deployment; its cost comes from the genai-prices
table at the moment it was recorded (`opennua.runtime.usage_cost`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from opennua.store import UsageRow

from ._authz import Reader
from ._edge import Context, errors_doc, ts

router = APIRouter()

By = Literal["principal", "workspace", "model", "deployment"]
KINDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "reasoning_output_tokens",
)
#: A chart wider than this many buckets says nothing more and costs the client.
MAX_BUCKETS = 1000
_KEY: dict[str, Callable[[UsageRow], str | None]] = {
    "principal": lambda r: r.principal_id,
    "workspace": lambda r: r.workspace_id,
    "model": lambda r: r.model,
    "deployment": lambda r: r.deployment,
}
_ERRORS = ("not_found", "validation_error", "unavailable")


def moment(stamp: str) -> datetime | None:
    """When a response was recorded (prices change over time), if its stamp says."""
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass
class Tally:
    """The five token kinds, responses and cost of some responses."""

    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    responses: int = 0
    unpriced_responses: int = 0
    cost: Decimal = field(default_factory=Decimal)

    def add(self, row: UsageRow) -> None:
        for kind in KINDS:
            self.tokens[kind] += row.tokens.get(kind, 0)
        self.responses += 1
        # Imported at the first usage read: the price table is not loaded before HTTP
        # answers (`nua serve`'s start, docs/reliability.md).
        from opennua.runtime import usage_cost

        provider, _, model = row.model.partition(":")
        cost = usage_cost(provider, model, row.tokens, moment(row.ts))
        if cost is None:
            self.unpriced_responses += 1
        else:
            self.cost += cost

    def doc(self) -> dict[str, Any]:
        return {
            **self.tokens,
            "responses": self.responses,
            "cost_usd": str(self.cost),
            "unpriced_responses": self.unpriced_responses,
        }


def totals(rows: Iterable[UsageRow], by: By) -> list[dict[str, Any]]:
    """One item per key (sorted by key as text): what `GET /v1/usage` answers."""
    tallies: dict[str | None, Tally] = defaultdict(Tally)
    for row in rows:
        tallies[_KEY[by](row)].add(row)
    return [
        {"key": key, **t.doc()} for key, t in sorted(tallies.items(), key=lambda kv: str(kv[0]))
    ]


def series(
    rows: Iterable[UsageRow], by: By, start: float, end: float, bucket: float
) -> dict[str, Any]:
    """Per key, each bucket's tally from `start` (inclusive) to `end`: the chart's data.
    A row whose stamp does not parse, or outside the window, is in no bucket."""
    count = max(0, math.ceil((end - start) / bucket))
    per_key: dict[str | None, list[Tally]] = {}
    for row in rows:
        when = moment(row.ts)
        if when is None:
            continue
        index = math.floor((when.timestamp() - start) / bucket)
        if not 0 <= index < count:
            continue
        key = _KEY[by](row)
        if key not in per_key:
            per_key[key] = [Tally() for _ in range(count)]
        per_key[key][index].add(row)
    return {
        "buckets": [ts(start + i * bucket) for i in range(count)],
        "series": [
            {
                "key": key,
                **{kind: [t.tokens[kind] for t in tallies] for kind in KINDS},
                "responses": [t.responses for t in tallies],
                "cost_usd": [str(t.cost) for t in tallies],
            }
            for key, tallies in sorted(per_key.items(), key=lambda kv: str(kv[0]))
        ],
    }


class UsageItem(BaseModel):
    key: str | None
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    reasoning_output_tokens: int
    responses: int
    #: USD of the priced responses, from the genai-prices table (a decimal string).
    cost_usd: str
    #: Responses no price is known for: `cost_usd` leaves them out.
    unpriced_responses: int


class UsageDoc(BaseModel):
    by: str
    since: str | None
    items: list[UsageItem]


class SeriesItem(BaseModel):
    key: str | None
    input_tokens: list[int]
    output_tokens: list[int]
    cache_read_input_tokens: list[int]
    cache_creation_input_tokens: list[int]
    reasoning_output_tokens: list[int]
    responses: list[int]
    #: USD per bucket as decimal strings (priced responses only).
    cost_usd: list[str]


class SeriesDoc(BaseModel):
    by: str
    since: str
    until: str
    bucket_seconds: float
    #: Each bucket's start (RFC 3339), oldest first.
    buckets: list[str]
    series: list[SeriesItem]


@router.get("/v1/usage", response_model=UsageDoc, responses=errors_doc(*_ERRORS))
async def usage(
    ctx: Context,
    auth: Reader,
    by: By = "principal",
    since: Annotated[float | None, Query(ge=0, le=1e11, description="unix seconds")] = None,
    workspace_id: Annotated[str | None, Query(max_length=128)] = None,
) -> JSONResponse:
    """The five token kinds and their cost per execution principal, workspace, model or
    deployment (one workspace: the one named, else your first)."""
    assert auth.workspace_id is not None
    rows = await ctx.authority.store.usage([auth.workspace_id], since)
    return JSONResponse({"by": by, "since": ts(since), "items": totals(rows, by)})


@router.get("/v1/usage/series", response_model=SeriesDoc, responses=errors_doc(*_ERRORS))
async def usage_series(
    ctx: Context,
    auth: Reader,
    since: Annotated[
        float | None, Query(ge=0, le=1e11, description="unix seconds; default a week ago")
    ] = None,
    bucket: Annotated[float, Query(ge=60, le=366 * 86400, description="seconds per bucket")] = 3600,
    by: By = "deployment",
    until: Annotated[
        float | None, Query(ge=0, le=1e11, description="unix seconds; default now")
    ] = None,
    workspace_id: Annotated[str | None, Query(max_length=128)] = None,
) -> JSONResponse:
    """A workspace's usage per `bucket` seconds from `since` to `until`: the five token
    kinds, responses and cost per key. Summed over the buckets, each key's numbers are
    those of `GET /v1/usage` with the same `since` (when `until` is now). At most 1,000
    buckets: a longer period gets wider ones (`bucket_seconds` says which)."""
    assert auth.workspace_id is not None
    now = ctx.clock()
    end = now if until is None else until
    since = now - 7 * 86400 if since is None else since
    # A period that needs more buckets than a chart can show gets wider ones (the answer
    # says which); an empty period has none.
    bucket = max(bucket, math.ceil((end - since) / MAX_BUCKETS))
    rows = await ctx.authority.store.usage([auth.workspace_id], since)
    body = series(rows, by, since, end, bucket)
    return JSONResponse(
        {"by": by, "since": ts(since), "until": ts(end), "bucket_seconds": bucket, **body}
    )
