"""A plugin's declared result shape: `output-schema` in `opennua.toml`, a JSON Schema file.

Checked when the plugin is read (so at validate and publish): the file must hold a JSON
object that is a valid schema under its `$schema` dialect (draft 2020-12 when it names
none), and its `$ref`s must point inside the file, because nothing is fetched at run time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import Draft202012Validator, validator_for

from opennua.plugins._errors import PluginError
from opennua.plugins._files import json_line, read_json

#: Retries of a final answer that does not fit the schema, unless `output-retries` says.
DEFAULT_OUTPUT_RETRIES = 2
MAX_OUTPUT_RETRIES = 10


def read_output_schema(root: Path, rel: str) -> Mapping[str, Any]:
    """The schema in the plugin's file `rel`, checked."""
    schema, text = read_json(root, rel)
    if not isinstance(schema, dict):
        raise PluginError("an output schema must be a JSON object", file=rel, line=1)
    # The stubs type `default` as a validator class; None is how jsonschema says "unknown".
    dialect: type[Validator] | None = validator_for(schema, default=cast(Any, None))
    if "$schema" not in schema:
        dialect = Draft202012Validator
    if dialect is None:
        raise PluginError(
            f"unknown $schema {schema.get('$schema')!r}: name a JSON Schema draft "
            "(2020-12, 2019-09, 7, 6, 4) or leave it out for 2020-12",
            file=rel,
            line=json_line(text, "$schema"),
        )
    try:
        dialect.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise PluginError(
            f"not a valid JSON Schema at {where}: {exc.message}",
            file=rel,
            line=_line_of(text, list(exc.absolute_path)),
        ) from None
    for ref in _refs(schema):
        if not ref.startswith("#"):
            raise PluginError(
                f"$ref {ref!r} points outside the schema file; only references inside it "
                "(#/$defs/…) are resolved",
                file=rel,
                line=json_line(text, "$ref"),
            )
    return schema


def _line_of(text: str, path: list[str | int]) -> int:
    """The line of `path`'s innermost key: each key searched from its parent's line on
    (array indices are skipped: the element's keys are searched instead)."""
    lines = text.splitlines()
    at = 0
    for key in path:
        if isinstance(key, int):
            continue
        found = next((n for n in range(at, len(lines)) if f'"{key}"' in lines[n]), None)
        if found is not None:
            at = found
    return at + 1


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)
