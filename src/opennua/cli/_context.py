"""What every client command shares: where the server is, how errors become exit codes.

The URL comes from `--url`, else `NUA_URL`, else the server of the last `nua login`, else
the `url` file `nua serve` writes into the data directory, else the default; the token
from `--token`, else `NUA_TOKEN`, else the one `nua login` stored for that URL, else the
data directory's `token` file. The data directory is `--data`, else `NUA_DATA`, else
`~/.nua`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any, TypeVar

import typer

from opennua.cli._credentials import default_server, stored_token
from opennua.cli._safe import SafeConsole, SafeText, json_line
from opennua.client import (
    DEFAULT_URL,
    ApiError,
    Client,
    ClientError,
    ConflictError,
    GoneError,
    IntegrityError,
    InvalidRequestError,
    NotFoundError,
    ServerError,
    UnauthorizedError,
    UnreachableError,
    connect,
)

DEFAULT_PORT = 7421  # the port of DEFAULT_URL, where `nua serve` listens by default

T = TypeVar("T")


class ExitCode(IntEnum):
    OK = 0
    TASK_FAILED = 1  # run/attach: the turn ended other than end_turn
    USAGE = 2  # bad arguments (also Click's own usage errors)
    NOT_FOUND = 3
    CONFLICT = 4  # 409: another answer won, session busy, turn (not) active
    UNREACHABLE = 5
    GONE = 6  # 410: the input request expired or was cancelled, or its turn ended
    REJECTED = 7  # 422 and other 4xx: the intent does not validate
    UNAUTHORIZED = 8  # 401/403: no or wrong token
    SERVER_ERROR = 9  # 5xx, or downloaded bytes that do not match their sha256
    DETACHED = 130  # Ctrl-C: this client stopped watching; the task continues


EXIT_CODES_HELP = """Exit codes: 0 ok · 1 the task ended without success (run, attach) ·
2 usage · 3 not found · 4 conflict (e.g. someone else answered first) · 5 server
unreachable · 6 gone (request expired or closed) · 7 rejected (invalid intent) · 8 not
authorized · 9 server error or sha256 mismatch · 130 detached with Ctrl-C (the task
continues)."""


def default_data_dir() -> Path:
    return Path(os.environ.get("NUA_DATA") or Path.home() / ".nua")


def _stdout_console() -> SafeConsole:
    # Printed text carries ids, errors, model and tool output: a SafeConsole interprets none
    # of it (no markup, no emoji codes) and cleans every string of control sequences.
    console = SafeConsole()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # Piped output is read by programs and people with wide windows: 80 columns would
        # cut ids in tables. A terminal (or COLUMNS) still decides its own width.
        console.width = 200
    return console


@dataclass
class Settings:
    url_option: str | None = None
    token_option: str | None = None
    data_option: Path | None = None
    client_id: str | None = None
    stdout: SafeConsole = field(default_factory=lambda: _stdout_console())
    stderr: SafeConsole = field(default_factory=lambda: SafeConsole(stderr=True))

    @property
    def data_dir(self) -> Path:
        return self.data_option or default_data_dir()

    @property
    def url(self) -> str:
        if self.url_option:
            return self.url_option
        written = default_server() or self._read(self.data_dir / "url")
        return written or DEFAULT_URL

    @property
    def token(self) -> str | None:
        return self.token_option or stored_token(self.url) or self._read(self.data_dir / "token")

    def client(self) -> Client:
        return connect(self.url, self.token, client_id=self.client_id)

    @staticmethod
    def _read(path: Path) -> str | None:
        try:
            return path.read_text(encoding="utf-8").strip() or None
        except OSError:
            return None


def settings(ctx: typer.Context) -> Settings:
    root = ctx.find_root()
    if not isinstance(root.obj, Settings):
        root.obj = Settings()
    return root.obj


def exit_code_for(exc: BaseException) -> ExitCode:
    if isinstance(exc, UnreachableError):
        return ExitCode.UNREACHABLE
    if isinstance(exc, IntegrityError | ServerError):
        return ExitCode.SERVER_ERROR
    if isinstance(exc, NotFoundError):
        return ExitCode.NOT_FOUND
    if isinstance(exc, ConflictError):
        return ExitCode.CONFLICT
    if isinstance(exc, GoneError):
        return ExitCode.GONE
    if isinstance(exc, UnauthorizedError):
        return ExitCode.UNAUTHORIZED
    if isinstance(exc, InvalidRequestError | ApiError):
        return ExitCode.REJECTED
    return ExitCode.SERVER_ERROR


def describe(exc: ClientError, settings: Settings) -> str:
    """One line a person can act on."""
    if isinstance(exc, UnreachableError):
        return (
            f"server unreachable at {exc.url} ({exc.reason}). Start one with `nua serve`, "
            "or point --url / NUA_URL at it."
        )
    if isinstance(exc, UnauthorizedError):
        if exc.status == 403:
            return f"forbidden ({exc.code}): {exc.detail}"
        where = settings.data_dir / "token"
        return (
            f"not authorized ({exc.code}: {exc.detail}). Run `nua login URL`, pass --token / "
            f"NUA_TOKEN, or use {where}."
        )
    if isinstance(exc, ConflictError) and exc.resolution is not None:
        return "conflict: " + who_answered(exc.resolution)
    if isinstance(exc, ApiError):
        return f"{exc.code}: {exc.detail}"
    return str(exc)


def answerer(answered_by: Mapping[str, Any] | None) -> str:
    """Who answered, as a person reads it: the person a client answered for first (a
    chat bridge's `@alice:example.org`), then the client and the principal."""
    by = answered_by or {}
    client = by.get("client_id")
    principal = f"principal {by['principal_id']}" if by.get("principal_id") else ""
    if by.get("on_behalf_of"):
        via = ", ".join(part for part in (f"via {client}" if client else "", principal) if part)
        return f"{by['on_behalf_of']}" + (f" ({via})" if via else "")
    return (client or "another client") + (f" ({principal})" if principal else "")


def who_answered(resolution: dict[str, Any]) -> str:
    who = answerer(resolution.get("answered_by"))
    if resolution.get("outcome") == "selected":
        what = f"option {resolution.get('option_id')}"
    elif resolution.get("outcome") == "answered":
        what = f"answer {resolution.get('payload')!r}"
    else:
        what = str(resolution.get("outcome"))
    request = resolution.get("request_id", "the request")
    return f"{request} was already answered by {who}: {what}"


def execute(
    ctx: typer.Context,
    body: Callable[[Client, Settings], Awaitable[int | None]],
    *,
    on_interrupt: Callable[[], int] | None = None,
) -> None:
    """Run one async command with a client; map its errors to the documented exit codes."""
    config = settings(ctx)

    async def main() -> int | None:
        async with config.client() as client:
            return await body(client, config)

    try:
        code = asyncio.run(main())
    except KeyboardInterrupt:
        if on_interrupt is None:
            config.stderr.print("interrupted")
            raise typer.Exit(ExitCode.DETACHED) from None
        raise typer.Exit(on_interrupt()) from None
    except ClientError as exc:
        config.stderr.print(error_text(describe(exc, config)), soft_wrap=True)
        raise typer.Exit(exit_code_for(exc)) from None
    raise typer.Exit(code or 0)


def error_text(message: str) -> SafeText:
    return SafeText.assemble(("error:", "red"), " ", message)


def fail(settings: Settings, message: str, code: ExitCode = ExitCode.USAGE) -> typer.Exit:
    settings.stderr.print(error_text(message), soft_wrap=True)
    return typer.Exit(code)


def write_line(text: str) -> None:
    """Machine output (JSON) goes straight to stdout, exact: no wrapping, no markup."""
    sys.stdout.write(json_line(text) + "\n")
    sys.stdout.flush()


def emit(cfg: Settings, json_out: bool, doc: Any, line: str) -> None:
    """`doc` as one JSON line (`--json`), else `line` for a person."""
    if json_out:
        write_line(json.dumps(doc, sort_keys=True))
    else:
        cfg.stdout.print(SafeText(line))


def emit_items(
    cfg: Settings, json_out: bool, items: Sequence[T], line: Callable[[T], str], *, empty: str
) -> None:
    """A JSON line per item (`--json`), else a line per item for a person (`empty` for none)."""
    if json_out:
        for item in items:
            write_line(json.dumps(item, sort_keys=True))
        return
    if not items:
        cfg.stdout.print(empty)
    for item in items:
        cfg.stdout.print(SafeText(line(item)))
