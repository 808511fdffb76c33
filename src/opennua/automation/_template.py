"""Prompt templates: `{{ name }}` and `{{ name.field.sub }}` filled from a mapping. Pure.

Deliberately tiny (no expressions, no attribute access, no loops): a template is written
by an admin, the values come from outside (a webhook's payload), and nothing in a value is
ever interpreted. A value that is not a string is inserted as compact JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_FIELD = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)\s*\}\}")
MAX_PROMPT = 100_000


class TemplateError(ValueError):
    """A template names a field the values do not have, or renders too large."""


def fields(template: str) -> list[str]:
    """The dotted names a template uses, in order."""
    return [m.group(1) for m in _FIELD.finditer(template)]


def render(template: str, values: Mapping[str, Any]) -> str:
    def fill(match: re.Match[str]) -> str:
        value: Any = values
        for part in match.group(1).split("."):
            if isinstance(value, Mapping) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                raise TemplateError(f"the template's field {match.group(1)!r} is missing")
        if isinstance(value, str):
            return value
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    text = _FIELD.sub(fill, template)
    if len(text) > MAX_PROMPT:
        raise TemplateError(f"the prompt would be {len(text)} characters (at most {MAX_PROMPT})")
    return text
