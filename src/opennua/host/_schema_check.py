"""A deliberately small JSON Schema check for answers to input requests.

Input requests ask for simple structured answers (a confirmation, a few named fields), so
the Host checks `type`, `required`, `properties` (recursively), `enum` and array `items`.
Keywords it does not know are ignored rather than guessed at.
"""

from __future__ import annotations

from typing import Any

from opennua.protocol import AnswerInput

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


def check_answer(request_payload: Any, intent: AnswerInput) -> str | None:
    """Why this answer does not fit the request (None when it does).

    The request's stored payload is its `input_request.opened` data: `options` and/or
    `response_schema`. An option must be one offered; a payload must fit the schema.
    """
    opened = request_payload if isinstance(request_payload, dict) else {}
    options = opened.get("options") or []
    schema = opened.get("response_schema")
    if intent.option_id is not None:
        offered = {o.get("option_id") for o in options if isinstance(o, dict)}
        if intent.option_id not in offered:
            return f"option {intent.option_id!r} is not one of {sorted(map(str, offered))}"
        return None
    if schema is None:
        return "this request takes one of its options, not a payload" if options else None
    return check_payload(intent.payload, schema)
