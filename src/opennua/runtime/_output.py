"""A structured result: the final answer read as JSON and checked against the plugin's
`output-schema` (docs/runtime.md, "Structured result").

Pure functions: what the model is told, how an answer is read, what a retry says. The loop
decides when (the root run's final answer) and records each retry as a checkpoint op.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema.validators import validator_for
from pydantic import JsonValue

#: The errors a retry prompt or a failed turn names; the rest are counted.
MAX_ERRORS = 10
_FENCED = re.compile(r"```(?:json)?[ \t]*\n(.*?)\n[ \t]*```", re.DOTALL)


@dataclass(frozen=True)
class Checked:
    """An answer read against the schema: `value` when it fits (`errors` empty)."""

    value: JsonValue
    errors: tuple[str, ...]

    @property
    def valid(self) -> bool:
        return not self.errors


def schema_note(schema: Mapping[str, Any]) -> str:
    """Appended to the root run's instructions, so the model knows the shape up front."""
    return (
        "When you have finished, your final answer must be a single JSON document that "
        "conforms to this JSON Schema, and nothing else (no prose around it; a ```json "
        "fenced block is accepted):\n"
        f"{json.dumps(schema, indent=2, ensure_ascii=False)}"
    )


def check_output(text: str, schema: Mapping[str, Any]) -> Checked:
    """Read `text` as JSON (the whole of it, or its last ```json fenced block) and validate
    it; errors say where (`$.path`) and what, at most `MAX_ERRORS` of them."""
    document = text.strip()
    blocks = _FENCED.findall(document)
    if blocks and not document.startswith(("{", "[")):
        document = blocks[-1].strip()
    try:
        value = json.loads(document)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        return Checked(None, (f"the answer is not JSON ({exc.msg} at {where})",))
    dialect = validator_for(schema)  # a plugin's schema names a known draft, or none (2020-12)
    found = sorted(dialect(schema).iter_errors(value), key=lambda e: list(map(str, e.path)))
    errors = [f"{e.json_path}: {e.message}" for e in found[:MAX_ERRORS]]
    if len(found) > MAX_ERRORS:
        errors.append(f"… and {len(found) - MAX_ERRORS} more")
    return Checked(value if not errors else None, tuple(errors))


def retry_prompt(errors: tuple[str, ...]) -> str:
    """What the model is told when its final answer does not fit."""
    listed = "\n".join(f"- {e}" for e in errors)
    return (
        "Your final answer does not conform to the required JSON Schema:\n"
        f"{listed}\n"
        "Answer again with only the corrected JSON document."
    )


def invalid_message(errors: tuple[str, ...], retries: int) -> str:
    """The failed turn's error message: how many retries were spent, and the last errors."""
    tried = f" after {retries} {'retry' if retries == 1 else 'retries'}" if retries else ""
    return f"the final answer does not conform to the output schema{tried}: " + "; ".join(errors)
