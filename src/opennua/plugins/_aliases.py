"""Claude Code's model aliases, as a sub-agent's `model:` front matter names them.

A deployment maps them (`nua deploy --model-alias opus=anthropic:…`); what it leaves out
takes a default for the provider of the deployment's model. Here, not in the runtime, so
that the Host warns at deploy time by the same rule the runtime runs by.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

#: What Claude Code's `opus`, `sonnet` and `haiku` mean when the deployment does not map
#: them, by the provider of its model (`inherit` is always the deployment's model).
DEFAULT_ALIASES: Mapping[str, Mapping[str, str]] = {
    "anthropic": {
        "opus": "anthropic:claude-opus-4-5",
        "sonnet": "anthropic:claude-sonnet-4-5",
        "haiku": "anthropic:claude-haiku-4-5",
    },
}
#: Providers with one model: every alias is the deployment's model (tests, the demo).
_SINGLE_MODEL = ("scripted",)


def model_of_alias(name: str, model: str, aliases: Mapping[str, str] | None = None) -> str | None:
    """The `provider:model` a sub-agent's `model` names under a deployment whose model is
    `model` and whose own map is `aliases`: a `provider:model` as written; `inherit` the
    deployment's model; an alias the deployment's mapping, else the provider's default.
    None: nothing maps it (the caller says so, or runs the deployment's model)."""
    if ":" in name:
        return name
    if name == "inherit":
        return model
    if aliases and name in aliases:
        return aliases[name]
    provider = model.partition(":")[0]
    if provider in _SINGLE_MODEL:
        return model
    return DEFAULT_ALIASES.get(provider, {}).get(name)


def unmapped_aliases(
    names: Iterable[str | None], model: str, aliases: Mapping[str, str] | None = None
) -> list[str]:
    """The aliases among `names` (sub-agents' `model`s) nothing maps under this deployment."""
    out: list[str] = []
    for name in names:
        if name and model_of_alias(name, model, aliases) is None and name not in out:
            out.append(name)
    return out
