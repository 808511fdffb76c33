"""The live view's behaviour around people: a question withdrawn when someone else answers
first, Ctrl-C detaching while the task goes on, and `nua demo` from nothing."""

from __future__ import annotations

import io
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from rich.console import Console
from typer.testing import CliRunner

from opennua.cli import app
from opennua.cli._demo import _copy_redacted, _open_log
from opennua.cli._live import Follower, LineReader
from opennua.client import connect
from tests.cli.conftest import Nua
from tests.e2e._proc import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


async def test_a_question_is_withdrawn_when_another_client_answers_first(nua: Nua) -> None:
    read_end, write_end = os.pipe()  # a keyboard nobody types on
    try:
        async with connect(nua.server.url, nua.server.token, client_id="cli_slow") as client:
            session = await client.create_session("withdrawn")
            out, err = io.StringIO(), io.StringIO()
            follower = Follower(
                session,
                Console(file=out, width=200),
                Console(file=err, width=200),
                prompt=True,
                lines=LineReader(os.fdopen(read_end, "r", closefd=False)),
            )
            async with session.subscribe() as live:
                accepted = await session.send_message("go")
                follower.turn_id = accepted.ids["turn_id"]
                nua.answer_when_open(session.session_id, client_id="cli_quick")
                code = await follower.run(live)
        assert code == 0
        assert "? Allow Run command?" in out.getvalue()
        assert "answered:" not in out.getvalue(), "this client never answered"
        assert "already answered by cli_quick" in err.getvalue()
        assert "■ end_turn" in out.getvalue()
    finally:
        os.close(write_end)
        os.close(read_end)


def test_ctrl_c_detaches_and_the_task_continues(nua: Nua) -> None:
    env = {k: v for k, v in nua.env().items() if v is not None}
    proc = subprocess.Popen(
        [sys.executable, "-m", "opennua.cli", "run", "keep going", "--no-prompt"],
        env=os.environ | env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # Interrupt once the task waits for approval: the CLI is attached and idle.
        sid = nua.session_titled("keep going")
        nua.open_request(sid)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err.decode()
    assert f"nua attach {sid}" in err.decode()
    assert "keeps running" in err.decode()
    # Nothing was cancelled: the task still waits for its answer on the server.
    state = nua.state(sid)
    assert state["status"] == "requires_action" and state["turns"][0]["state"] != "ended"
    assert CliRunner().invoke(app, ["cancel", sid], env=nua.env()).exit_code == 0


@pytest.mark.slow
def test_demo_starts_a_server_runs_the_task_and_stops_it(tmp_path: Path) -> None:
    port = free_port()
    env = {
        "NUA_DATA": str(tmp_path),
        "NUA_URL": None,
        "NUA_TOKEN": None,
        "NUA_DEMO_STEP_DELAY": "0.02",
        "COLUMNS": "200",
    }
    result = CliRunner().invoke(
        app, ["demo", "--port", str(port), "--prompt"], env=env, input="1\n"
    )
    assert result.exit_code == 0, result.output
    assert "? Allow Run command?" in result.stdout
    assert "▣ artifact report.md" in result.stdout and "■ end_turn" in result.stdout
    assert "started nua serve" in result.stderr and "stopped" in result.stderr
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
    # The demo's session stays in its data directory for the next server.
    assert (tmp_path / "nua.db").exists() and (tmp_path / "token").exists()
    # The server's log is this user's only, and holds no login link with the token in it.
    log = tmp_path / "demo-serve.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    token = (tmp_path / "token").read_text().strip()
    text = log.read_text()
    assert token not in text and "login?token=<the token in DATA/token>" in text
    assert "web UI: http://127.0.0.1:" in result.stderr
    # Which confinement runs the demo's shell command (bubblewrap is installed here).
    assert "sandbox: bubblewrap (no network; egress through the proxy)" in result.stderr


def test_the_demo_log_is_private_whatever_the_umask_and_holds_no_token(tmp_path: Path) -> None:
    log = tmp_path / "demo-serve.log"
    log.write_text("an older run\n")
    log.chmod(0o644)
    old_umask = os.umask(0)
    try:
        opened = _open_log(log)
        fresh = _open_log(tmp_path / "fresh.log")
    finally:
        os.umask(old_umask)
    fresh.close()
    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "wb") as server_output:
        server_output.write(b"web UI: http://127.0.0.1:7421/login?token=s3cr3t-_Tok\nnext\n")
    _copy_redacted(os.fdopen(read_end, "rb"), opened)
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "fresh.log").stat().st_mode) == 0o600
    assert log.read_text() == (
        "an older run\nweb UI: http://127.0.0.1:7421/login?token=<the token in DATA/token>\nnext\n"
    )
