"""What model responses cost, from the maintained `genai-prices` table (the one
pydantic-ai's `ModelResponse.cost()` uses). Apart from the budget so that a reader of
recorded usage (`GET /v1/usage`) or a deployment's check does not import the agent loop."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal

import genai_prices

#: Providers whose responses cost nothing (the offline scripted models).
FREE_PROVIDERS = frozenset({"scripted"})


def model_priced(model: str) -> bool:
    """Whether a cost limit can be enforced for `provider:model`: its provider is free or
    the `genai-prices` table knows the model. A deployment with `max_cost_usd` on any other
    model is refused when it is saved, not after its first response."""
    provider, _, name = model.partition(":")
    if provider in FREE_PROVIDERS:
        return True
    try:
        genai_prices.calc_price(genai_prices.Usage(), name, provider_id=provider)
    except (LookupError, ValueError):
        return False
    return True


def usage_cost(
    provider: str, model: str, tokens: Mapping[str, int], at: datetime | None = None
) -> Decimal | None:
    """USD of one recorded model response (a `usage.recorded`'s provider, model and token
    counts) from the same `genai-prices` table the budget uses; None when no price is
    known. `input_tokens` includes cache reads and writes, as pydantic-ai counts them."""
    if provider in FREE_PROVIDERS:
        return Decimal(0)
    usage = genai_prices.Usage(
        input_tokens=tokens.get("input_tokens", 0),
        output_tokens=tokens.get("output_tokens", 0),
        cache_read_tokens=tokens.get("cache_read_input_tokens", 0),
        cache_write_tokens=tokens.get("cache_creation_input_tokens", 0),
    )
    try:
        return genai_prices.calc_price(
            usage, model, provider_id=provider, genai_request_timestamp=at
        ).total_price
    except (LookupError, ValueError):
        return None
