"""A person's chat answer to an input request, parsed: pure, so every rule is testable.

A reply may name an option by its number (as the request message lists them) or its id;
a request without options (`ask_user`) takes the reply's text as the payload. A reaction
✅ chooses the first allow option, ❌ the first reject option. Anything else is refused
with a sentence the bridge replies with.
"""

from __future__ import annotations

from dataclasses import dataclass

from opennua.protocol.state import InputRequest

from ._render import REACTIONS, options_of


@dataclass(frozen=True)
class Choice:
    option_id: str | None = None
    payload: str | None = None


@dataclass(frozen=True)
class Refusal:
    message: str


def _listing(request: InputRequest) -> str:
    options = options_of(request)
    numbers = ", ".join(str(n) for n in range(1, len(options) + 1))
    ids = ", ".join(str(o["option_id"]) for o in options)
    return f"Reply with {numbers} or one of: {ids}."


def from_text(request: InputRequest, text: str) -> Choice | Refusal:
    options = options_of(request)
    answer = text.strip()
    if not options:
        if not answer:
            return Refusal("An empty reply is no answer.")
        if request["response_schema"] not in (None, {}) and not _takes_text(request):
            return Refusal("This request needs a structured answer; use the web UI or CLI.")
        return Choice(payload=answer)
    if answer.isdigit():
        index = int(answer)
        if 1 <= index <= len(options):
            return Choice(option_id=str(options[index - 1]["option_id"]))
        return Refusal(f"There is no option {index}. {_listing(request)}")
    for option in options:
        names = (str(option["option_id"]).casefold(), str(option["name"]).casefold())
        if answer.casefold() in names:
            return Choice(option_id=str(option["option_id"]))
    shown = answer if len(answer) <= 40 else answer[:40] + "…"
    return Refusal(f"I don't know the option {shown!r}. {_listing(request)}")


def from_reaction(request: InputRequest, key: str) -> Choice | Refusal | None:
    """None for a reaction that is no answer (👍 on a request is just a reaction)."""
    kinds = REACTIONS.get(key.replace("\ufe0f", ""))
    if kinds is None:
        return None
    for option in options_of(request):
        if option.get("kind") in kinds:
            return Choice(option_id=str(option["option_id"]))
    return Refusal(f"This request has no option for {key}. {_listing(request)}")


def _takes_text(request: InputRequest) -> bool:
    schema = request["response_schema"] or {}
    return schema.get("type") == "string"
