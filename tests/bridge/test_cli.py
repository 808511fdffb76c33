"""`nua bridge matrix` refuses to start without a token and never takes one on argv."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from opennua.cli import app

ARGS = ["bridge", "matrix", "--homeserver", "http://127.0.0.1:9", "--user", "@nua:localhost"]


def test_without_a_token_the_bridge_exits_2_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NUA_MATRIX_TOKEN", raising=False)
    result = CliRunner().invoke(app, ["--data", str(tmp_path), *ARGS])
    assert result.exit_code == 2
    assert "no access token: pass --token-file or set NUA_MATRIX_TOKEN" in result.output
    empty = tmp_path / "empty.token"
    empty.write_text("\n")
    result = CliRunner().invoke(app, ["--data", str(tmp_path), *ARGS, "--token-file", str(empty)])
    assert result.exit_code == 2


def test_a_bad_if_busy_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUA_MATRIX_TOKEN", "syt_x")
    result = CliRunner().invoke(app, ["--data", str(tmp_path), *ARGS, "--if-busy", "later"])
    assert result.exit_code == 2 and "--if-busy must be" in result.output


def test_the_matrix_token_is_no_option() -> None:
    result = CliRunner().invoke(app, ["bridge", "matrix", "--help"])
    assert "--token-file" in result.output
    assert "--access-token" not in result.output and "--matrix-token" not in result.output
