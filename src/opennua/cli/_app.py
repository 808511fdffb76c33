"""The Typer application; each command group lives in its own module."""

from __future__ import annotations

import typer

from opennua.cli._schema import schema
from opennua.cli._serve import serve_command

app = typer.Typer(name="nua", no_args_is_help=True, add_completion=False)
app.command()(schema)
app.command(name="serve")(serve_command)


@app.callback()
def _root() -> None:
    """opennua: a durable runtime for long-running AI agents."""


def main() -> None:
    app()
