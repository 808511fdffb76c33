"""A deliberately small JSON Schema check for answers to input requests.

Input requests ask for simple structured answers (a confirmation, a few named fields), so
the Host checks `type`, `required`, `properties` (recursively), `enum` and array `items`.
Keywords it does not know are ignored rather than guessed at.
"""

from __future__ import annotations

from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def check_payload(value: Any, schema: Any, path: str = "$") -> str | None:
    """The first reason `value` does not fit `schema`, or None."""
    if not isinstance(schema, dict):
        return None
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not any(_is(value, name) for name in names):
            return f"{path}: expected {' or '.join(map(str, names))}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path}: not one of {schema['enum']}"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                return f"{path}: missing required property {key!r}"
        for key, sub in (schema.get("properties") or {}).items():
            if key in value:
                problem = check_payload(value[key], sub, f"{path}.{key}")
                if problem:
                    return problem
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            problem = check_payload(item, schema["items"], f"{path}[{index}]")
            if problem:
                return problem
    return None


def _is(value: Any, name: str) -> bool:
    kinds = _TYPES.get(name)
    if kinds is None:
        return True
    # bool is an int in Python but not in JSON.
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, kinds)
