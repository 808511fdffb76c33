"""The `nua` command line."""

from opennua.cli._app import app, main

__all__ = ["app", "main"]
