"""The sandbox mode from the operator to the command: `nua serve --sandbox`, the banner, the
supervisor's attempts; on a real store, with the real bubblewrap."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from opennua.cli import app
from opennua.runtime import Sandbox, SandboxMode, default_agent, sandbox_problem
from opennua.runtime.testing import ScriptedModel, ScriptStep, call, say
from opennua.server import ServeConfig
from opennua.server._serve import _announce
from opennua.store import open_store
from tests._support.polling import until
from tests._support.supervisor import EID, SID, accept, make_supervisor, session_state


def _banner(config: ServeConfig) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _announce(config, "scripted:demo", "sup_x", "tok")
    return out.getvalue()


def test_the_banner_says_how_shell_commands_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bwrap = "sandbox: bubblewrap (no network; egress through the proxy)\n"
    assert bwrap in _banner(ServeConfig(data_dir=tmp_path))  # auto: bubblewrap is here
    landlock = _banner(ServeConfig(data_dir=tmp_path, sandbox="landlock"))
    assert "sandbox: Landlock + namespaces (bubblewrap not used;" in landlock
    unconfined = _banner(ServeConfig(data_dir=tmp_path, sandbox="none"))
    assert "sandbox: NONE — shell commands and local MCP servers run unconfined" in unconfined
    assert "sandbox" not in _banner(ServeConfig(data_dir=tmp_path, role="host"))
    # Where bubblewrap cannot start, the operator is told at startup, with the way out.
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    sandbox_problem.cache_clear()
    try:
        broken = _banner(ServeConfig(data_dir=tmp_path, sandbox="bwrap"))
        # `auto` (the default) confines with Landlock where bubblewrap cannot start.
        fallback = _banner(ServeConfig(data_dir=tmp_path))
    finally:
        monkeypatch.undo()
        sandbox_problem.cache_clear()
    assert "sandbox: UNAVAILABLE (bubblewrap cannot start: bwrap: setting up" in broken
    assert "are refused; install bubblewrap, or --sandbox none runs them unconfined" in broken
    assert "sandbox: Landlock + namespaces (bubblewrap not used;" in fallback


def test_nua_serve_takes_only_known_sandbox_modes() -> None:
    result = CliRunner().invoke(app, ["serve", "--sandbox", "docker"])
    assert result.exit_code == 2
    assert "--sandbox must be auto, bwrap, landlock or none" in result.output
    assert "--sandbox" in CliRunner().invoke(app, ["serve", "--help"]).output


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
async def test_the_supervisor_runs_shell_in_the_mode_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox: SandboxMode
) -> None:
    monkeypatch.setenv("NUA_DEMO_STEP_DELAY", "0")
    (tmp_path / "token").write_text("owner-token\n")
    tools = tuple(
        dataclasses.replace(t, requires_approval=False) if t.name == "shell" else t
        for t in default_agent("scripted:test").tools
    )
    agent = dataclasses.replace(default_agent("scripted:test"), tools=tools)
    model = ScriptedModel(
        [ScriptStep(calls=(call("shell", command="pwd; cat ../../token; true"),)), say("ok")]
    )
    store = await open_store(f"sqlite:///{tmp_path}/nua.db", data_dir=tmp_path)
    async with store:
        await accept(store, time.time())
        supervisor = make_supervisor(store, tmp_path, agent, model=model, sandbox=Sandbox(sandbox))
        runner = asyncio.create_task(supervisor.run())
        try:

            async def ended() -> bool:
                return (await store.get_execution(EID)).status == "completed"

            await until(ended)
        finally:
            await supervisor.shutdown()
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        state: Any = await session_state(store)
    assert state["session_id"] == SID
    shell = next(iter(state["turns"][0]["tool_calls"].values()))
    assert shell["status"] == "completed"
    if sandbox == "bwrap":
        assert shell["output"].splitlines()[0] == "/workspace"
        assert "owner-token" not in shell["output"]
    else:
        assert shell["output"].splitlines()[0].startswith(str(tmp_path))
        assert "owner-token" in shell["output"]
