"""`nua schema`: the JSON Schema of the protocol's wire types."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from opennua.protocol import json_schemas
from opennua.protocol.schema import SCHEMA_NAMES


def render_schema(name: str) -> str:
    return json.dumps(json_schemas()[name], indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def schema(
    name: Annotated[
        str | None, typer.Argument(help=f"One of {', '.join(SCHEMA_NAMES)}; all when omitted.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write <name>.schema.json files here.")
    ] = None,
) -> None:
    """Print (or write) the JSON Schema of actions, state, intents and intent results."""
    if name is not None and name not in SCHEMA_NAMES:
        typer.echo(
            f"error: unknown schema {name!r}; choose from {', '.join(SCHEMA_NAMES)}", err=True
        )
        raise typer.Exit(2)
    names = [name] if name else list(SCHEMA_NAMES)
    if out is None:
        if name:
            typer.echo(render_schema(name), nl=False)
        else:
            bundle = {n: json_schemas()[n] for n in names}
            typer.echo(json.dumps(bundle, indent=2, sort_keys=True, ensure_ascii=False))
        return
    out.mkdir(parents=True, exist_ok=True)
    for each in names:
        (out / f"{each}.schema.json").write_text(render_schema(each), encoding="utf-8")
        typer.echo(str(out / f"{each}.schema.json"))
