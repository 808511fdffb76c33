"""`nua bridge matrix` refuses to start without a token and never takes one on argv;
`nua bridge synapse` takes its Synapse down with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opennua.cli import app
from tests.server._serve_proc import free_port

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


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_sigterm_stops_nua_bridge_synapse_and_its_synapse(tmp_path: Path) -> None:
    # SIGTERM ended `nua bridge synapse` and left Synapse running (issue 35).
    pytest.importorskip("synapse")
    proc = subprocess.Popen(
        [sys.executable, "-m", "opennua.cli", "bridge", "synapse", "--dir", str(tmp_path / "hs"),
         "--port", str(free_port())],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    synapse = None
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # printed once Synapse answers and the users exist
        assert first.startswith("synapse on "), first
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) == 1
        synapse = int(children[0])
        assert "synapse" in Path(f"/proc/{synapse}/cmdline").read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        # Its Synapse went with it (and was reaped by it: no /proc entry, not even a zombie).
        assert not Path(f"/proc/{synapse}").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        if synapse is not None and Path(f"/proc/{synapse}").exists():
            os.kill(synapse, signal.SIGKILL)  # the leak this test is about: not for others
