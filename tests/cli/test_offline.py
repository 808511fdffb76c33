"""What the CLI decides without a server: help, argument checks, where it looks for the
server and token, and how errors map onto exit codes."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx
import pytest
import typer
import typer.main
from typer.testing import CliRunner

from opennua.cli import app
from opennua.cli._context import ExitCode, Settings, exit_code_for
from opennua.client import (
    DEFAULT_URL,
    ConflictError,
    GoneError,
    IntegrityError,
    InvalidRequestError,
    NotFoundError,
    ServerError,
    UnauthorizedError,
    UnreachableError,
)
from opennua.client._errors import error_from_response

COMMANDS = (
    "serve",
    "demo",
    "run",
    "attach",
    "answer",
    "sessions",
    "show",
    "history",
    "usage",
    "trace",
    "cancel",
    "retry",
    "artifacts",
    "artifact",
)


def test_help_lists_every_command_and_the_exit_codes() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    for command in COMMANDS:
        assert f"  {command} " in result.stdout, command
    text = " ".join(result.stdout.split())
    for code, meaning in [
        ("0", "ok"),
        ("2", "usage"),
        ("3", "not found"),
        ("4", "conflict"),
        ("5", "server unreachable"),
        ("6", "gone"),
        ("7", "rejected"),
        ("130", "detached"),
    ]:
        assert f"{code} {meaning}" in text, (code, meaning)
    get = CliRunner().invoke(app, ["artifact", "get", "--help"])
    assert get.exit_code == 0 and "sha256" in get.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["answer", "ses_1", "req_1"],
        ["answer", "ses_1", "req_1", "--option", "a", "--text", "b"],
        ["answer", "ses_1", "req_1", "--payload", "{not json"],
        ["run", "x", "--if-busy", "sometimes"],
        ["attach", "ses_1", "--after", "-1"],
        ["show"],
        ["no-such-command"],
    ],
)
def test_bad_arguments_exit_2_before_any_request(args: list[str]) -> None:
    # No server anywhere near: a usage error must not even try to connect.
    env = {"NUA_URL": "http://127.0.0.1:9", "NUA_TOKEN": "t"}
    assert CliRunner().invoke(app, args, env=env).exit_code == ExitCode.USAGE


def test_an_unreachable_server_exits_5_with_a_hint(tmp_path: Path) -> None:
    env = {"NUA_URL": "http://127.0.0.1:9", "NUA_DATA": str(tmp_path), "NUA_TOKEN": None}
    result = CliRunner().invoke(app, ["sessions"], env=env)
    assert result.exit_code == ExitCode.UNREACHABLE
    assert "nua serve" in result.stderr


def test_run_with_no_server_fails_fast_with_exit_5(tmp_path: Path) -> None:
    # Connection refused before any answer is not transient: no 30 s of retries.
    env = {"NUA_URL": "http://127.0.0.1:9", "NUA_DATA": str(tmp_path)}
    began = time.monotonic()
    result = CliRunner().invoke(app, ["run", "hello", "--detach"], env={**env, "NUA_TOKEN": "t"})
    assert result.exit_code == ExitCode.UNREACHABLE, result.output
    assert time.monotonic() - began < 2
    assert "nua serve" in result.stderr


def test_url_and_token_come_from_flags_then_env_then_the_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NUA_DATA", raising=False)
    assert Settings(data_option=tmp_path).url == DEFAULT_URL
    assert Settings(data_option=tmp_path).token is None
    (tmp_path / "url").write_text("http://127.0.0.1:7600\n")  # what `nua serve` writes
    (tmp_path / "token").write_text("from-file\n")
    from_dir = Settings(data_option=tmp_path)
    assert (from_dir.url, from_dir.token) == ("http://127.0.0.1:7600", "from-file")
    flags = Settings(url_option="http://h:1", token_option="from-flag", data_option=tmp_path)
    assert (flags.url, flags.token) == ("http://h:1", "from-flag")
    monkeypatch.setenv("NUA_DATA", str(tmp_path))
    assert Settings().token == "from-file"
    # The root options read NUA_URL / NUA_TOKEN (Typer's envvar), below flags.
    seen: list[tuple[str, str | None]] = []

    from opennua.cli import _read

    def spy(ctx: object, body: object) -> None:
        settings = ctx.find_root().obj  # type: ignore[attr-defined]
        seen.append((settings.url, settings.token))

    monkeypatch.setattr(_read, "execute", spy)
    env = {"NUA_URL": "http://env:2", "NUA_TOKEN": "from-env"}
    CliRunner().invoke(app, ["sessions"], env=env)
    CliRunner().invoke(app, ["--url", "http://flag:3", "sessions"], env=env)
    assert seen == [("http://env:2", "from-env"), ("http://flag:3", "from-env")]


def test_global_options_may_follow_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    # `nua run --url …` was "No such option" (issue 35), though errors say to use --url.
    from opennua.cli import _automation, _read

    seen: list[tuple[str, str | None, str | None]] = []

    def spy(ctx: object, body: object) -> None:
        s = ctx.find_root().obj  # type: ignore[attr-defined]
        seen.append((s.url, s.token, s.client_id))

    monkeypatch.setattr(_read, "execute", spy)
    monkeypatch.setattr(_automation, "execute", spy)
    runner, env = CliRunner(), {"NUA_URL": None, "NUA_TOKEN": None, "NUA_CLIENT_ID": None}
    runner.invoke(app, ["sessions", "--url", "http://a:1", "--token=t1"], env=env)
    runner.invoke(app, ["show", "ses_1", "--client-id", "cli_x", "--url=http://b:2"], env=env)
    runner.invoke(app, ["schedule", "runs", "sch_1", "--url", "http://c:3"], env=env)
    runner.invoke(app, ["--url", "http://d:4", "sessions", "--token", "t4"], env=env)
    assert seen == [
        ("http://a:1", "t1", None),
        ("http://b:2", None, "cli_x"),
        ("http://c:3", None, None),
        ("http://d:4", "t4", None),
    ]


def test_a_commands_own_option_of_a_global_name_stays_its_own() -> None:
    from opennua.cli._app import app as root
    from opennua.cli._globals import hoist

    group = typer.main.get_command(root)
    ctx = typer.Context(group)
    # `nua serve --data` and `nua login --token` are the commands' own options.
    assert hoist(group, ctx, ["serve", "--data", "/d"]) == ["serve", "--data", "/d"]
    assert hoist(group, ctx, ["login", "URL", "--token", "t"]) == ["login", "URL", "--token", "t"]
    # After `--` everything is an argument.
    assert hoist(group, ctx, ["run", "--", "--url", "x"]) == ["run", "--", "--url", "x"]
    assert hoist(group, ctx, ["run", "hi", "--url", "u"]) == ["--url", "u", "run", "hi"]


def test_nua_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"nua {importlib.metadata.version('opennua')}"


def _problem(status: int, code: str) -> Exception:
    return error_from_response(httpx.Response(status, json={"code": code, "detail": "d"}))


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (_problem(404, "not_found"), ExitCode.NOT_FOUND),
        (_problem(409, "input_request_resolved"), ExitCode.CONFLICT),
        (_problem(409, "session_busy"), ExitCode.CONFLICT),
        (_problem(410, "gone"), ExitCode.GONE),
        (_problem(422, "validation_error"), ExitCode.REJECTED),
        (_problem(401, "unauthorized"), ExitCode.UNAUTHORIZED),
        (_problem(503, "unavailable"), ExitCode.SERVER_ERROR),
        (UnreachableError("http://x", "refused"), ExitCode.UNREACHABLE),
        (IntegrityError("art_1", "a" * 64, "b" * 64), ExitCode.SERVER_ERROR),
    ],
)
def test_errors_map_onto_the_documented_exit_codes(error: Exception, code: ExitCode) -> None:
    assert exit_code_for(error) == code
    kinds = (
        NotFoundError,
        ConflictError,
        GoneError,
        InvalidRequestError,
        UnauthorizedError,
        ServerError,
        UnreachableError,
        IntegrityError,
    )
    assert isinstance(error, kinds)


def test_a_download_that_does_not_verify_exits_9_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    published = hashlib.sha256(b"the real report").hexdigest()

    class Tampering(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.endswith("/content"):
                payload = b"a tampered report"
            else:
                meta = {"artifact_id": "art_1", "name": "r.md", "size": 15, "sha256": published}
                payload = json.dumps(meta).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Tampering)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.chdir(tmp_path)
    try:
        env = {"NUA_URL": f"http://127.0.0.1:{httpd.server_port}", "NUA_TOKEN": "t"}
        result = CliRunner().invoke(app, ["artifact", "get", "art_1", "-o", "r.md"], env=env)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert result.exit_code == ExitCode.SERVER_ERROR, result.output
    assert "sha256" in result.stderr
    assert list(tmp_path.iterdir()) == []
