"""`shell` under the real bubblewrap: what an approved command can no longer reach, and that
nothing it starts outlives the call. With `sandbox="none"` the old, unconfined behaviour.

The layout is the server's: the data directory holds the owner token and the workspaces,
and the server's environment holds a provider key.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import secrets
import socket
import sys
import time
from pathlib import Path

import pytest

from opennua.runtime import Completed, Stopped, ToolError, default_agent
from opennua.runtime._builtins import BUILTIN_TOOLS, shell
from opennua.runtime._sandbox import Sandbox, SandboxMode, confine, sandbox_problem
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, ScriptStep, call, say
from tests.runtime.helpers import drive, make_loop, processes_running, tool_context

KEY = "sk-leak-" + secrets.token_hex(8)
TOKEN = "owner-token-" + secrets.token_hex(8)
#: The reproduction from the probe, verbatim.
LEAK = r"tr '\0' '\n' < /proc/$PPID/environ; cat ../../token"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    data = tmp_path / "data"
    (data / "workspaces" / "ses_1").mkdir(parents=True)
    (data / "token").write_text(TOKEN + "\n")
    (data / "nua.db").write_text("the database")
    return data / "workspaces" / "ses_1"


async def _sh(workdir: Path, command: str, sandbox: SandboxMode = "bwrap", **kw: float) -> str:
    """The command's output, whether it exited 0 or not."""
    try:
        return str(await shell.fn(tool_context(workdir, sandbox), command, **kw))
    except ToolError as exc:
        return exc.message


def test_bubblewrap_starts_here() -> None:
    # CI installs bubblewrap (.ci/run); every test below runs the real thing.
    assert sandbox_problem("bwrap") is None
    assert sandbox_problem("none") is None


async def test_the_probes_reproduction_leaks_nothing(workdir: Path) -> None:
    out = await _sh(workdir, LEAK)
    assert KEY not in out and TOKEN not in out
    assert "No such file" in out  # ../../token is not there at all
    # Its parent's environment is the sandbox's own: the scrubbed allowlist and HOME.
    environ = await _sh(workdir, r"tr '\0' '\n' < /proc/$PPID/environ")
    names = {line.split("=", 1)[0] for line in environ.splitlines() if "=" in line}
    assert names <= {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "HOME"}


async def test_the_data_directory_and_other_processes_are_invisible(workdir: Path) -> None:
    data = workdir.parent.parent
    out = await _sh(
        workdir, f"cat {data}/token; ls {data}; echo PROCS $(ls /proc | grep -c '^[0-9]'); ls /"
    )
    assert TOKEN not in out and "nua.db" not in out
    lines = out.splitlines()
    procs = next(int(line.split()[1]) for line in lines if line.startswith("PROCS"))
    assert procs <= 6  # bubblewrap's init, the shell and its pipeline; the host has hundreds
    top = set(lines[lines.index(next(x for x in lines if x.startswith("PROCS"))) + 1 :])
    # The interpreter the sandbox's launcher runs on is bound read-only where it lives.
    interpreter = {Path(p).parts[1] for p in (sys.prefix, sys.base_prefix)}
    assert "workspace" in top and top <= {
        *("bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp"),
        *("usr", "workspace"),
        *interpreter,
    }
    assert KEY not in await _sh(workdir, "cat /proc/*/environ | tr '\\0' '\\n'")


async def test_what_etc_offers_is_readable_by_the_sandboxs_user(workdir: Path) -> None:
    # Run as root the program is SANDBOX_UID: the /etc bubblewrap made on the way to its
    # binds was root's alone, so Node failed on /etc/ssl/openssl.cnf, `id` knew no name.
    out = await _sh(workdir, "id -un; head -c 1 /etc/ssl/openssl.cnf && echo READ")
    assert "READ" in out and "Permission denied" not in out, out
    assert out.splitlines()[0] != str(os.getuid() or 65534)  # a name, from /etc/passwd


async def test_there_is_no_network(workdir: Path) -> None:
    # PostgreSQL listens on the host's 127.0.0.1:5432; from the sandbox it is not there.
    with socket.create_connection(("127.0.0.1", 5432), timeout=3):
        pass
    probe = (
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 5432), timeout=3)"
        "; print('CONNECTED')\""
    )
    out = await _sh(workdir, probe)
    assert "CONNECTED" not in out and "Connection refused" in out
    unconfined = await _sh(workdir, probe, sandbox="none")
    assert "CONNECTED" in unconfined


async def test_the_workspace_is_the_only_writable_path(workdir: Path) -> None:
    marker = f"opennua-sandbox-{secrets.token_hex(4)}"
    targets = ["/usr/x", "/etc/x", "/x", "../x", "/workspace/../x", "/proc/x", "/dev/x"]
    script = "; ".join(f"touch {t} 2>/dev/null && echo WROTE {t}" for t in targets)
    scratch = f"touch /tmp/{marker} /dev/shm/{marker}"
    out = await _sh(workdir, f"{script}; {scratch}; echo hi > here.txt; echo done")
    assert "WROTE" not in out and out.strip().endswith("done")
    assert (workdir / "here.txt").read_text() == "hi\n"
    # The sandbox's scratch space is its own: nothing reached the host's.
    assert not (Path("/tmp") / marker).exists() and not (Path("/dev/shm") / marker).exists()
    assert sorted(p.name for p in workdir.parent.iterdir()) == ["ses_1"]


async def test_a_background_process_does_not_outlive_the_call(workdir: Path) -> None:
    started = time.monotonic()
    out = await _sh(workdir, "(sleep 0.417; touch late) & echo started")
    assert out == "started\n" and time.monotonic() - started < 0.4
    assert processes_running("sleep 0.417") == []
    await asyncio.sleep(0.6)  # past the time it would have touched its file
    assert not (workdir / "late").exists()


async def test_a_timeout_kills_the_whole_tree(workdir: Path) -> None:
    out = await _sh(
        workdir, "(sleep 30.51; touch late) & sleep 30.52; touch done", timeout_seconds=0.3
    )
    assert out == "command timed out after 0.3s"
    assert processes_running("sleep 30.5") == []
    assert not (workdir / "done").exists()


def _unapproved_shell() -> tuple[object, ...]:
    return tuple(
        dataclasses.replace(t, requires_approval=False) if t.name == "shell" else t
        for t in BUILTIN_TOOLS
    )


async def test_an_attempt_cancelled_from_outside_kills_the_tree(workdir: Path) -> None:
    # A lost lease cancels the attempt's task (not the cancel event): the command must die
    # with it, not run on behind its back.
    agent = dataclasses.replace(default_agent("scripted:test"), tools=_unapproved_shell())
    model = ScriptedModel(
        [ScriptStep(calls=(call("shell", command="echo up > up; sleep 30.61; touch done"),))]
    )
    loop = make_loop(agent, InMemoryJournal(), workdir, model)  # type: ignore[arg-type]
    task = asyncio.create_task(loop.run("x"))
    for _ in range(500):
        if (workdir / "up").exists() and processes_running("sleep 30.61"):
            break
        await asyncio.sleep(0.01)
    assert processes_running("sleep 30.61")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert processes_running("sleep 30.61") == []


async def test_without_a_sandbox_the_old_unconfined_behaviour(workdir: Path) -> None:
    out = await _sh(workdir, LEAK, sandbox="none")
    # What the probe found: the owner token, and the server's whole environment (a key
    # set before the server started would be in it).
    assert TOKEN in out
    names = {line.split("=", 1)[0] for line in out.splitlines() if "=" in line}
    assert names - {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "HOME"}
    assert (await _sh(workdir, "pwd", sandbox="none")).strip() == str(workdir)
    await _sh(workdir, "(sleep 30.71; touch late) >/dev/null 2>&1 & echo bg", sandbox="none")
    left = processes_running("sleep 30.71")
    assert left  # it outlives the call, as before
    for pid in left:
        os.kill(pid, 9)


@pytest.mark.usefixtures("broken_bwrap")
async def test_shell_is_refused_when_bubblewrap_cannot_start(tmp_path: Path) -> None:
    assert sandbox_problem("bwrap") == (
        "bubblewrap cannot start: bwrap: No permissions to create a new namespace"
    )
    with pytest.raises(ToolError, match="--sandbox none") as err:
        await shell.fn(tool_context(tmp_path), "touch ran")
    assert err.value.code == "sandbox_unavailable"
    assert not (tmp_path / "ran").exists()
    # In a turn it is a failed tool call the model is told about; the turn goes on.
    agent = dataclasses.replace(default_agent("scripted:test"), tools=_unapproved_shell())
    model = ScriptedModel([ScriptStep(calls=(call("shell", command="touch ran"),)), say("ok")])
    outcome, journal, _ = await drive(
        lambda j: make_loop(agent, j, tmp_path, model),  # type: ignore[arg-type]
        InMemoryJournal(),
        "x",
    )
    assert isinstance(outcome, Completed) and not (tmp_path / "ran").exists()
    result = [e.data for e in journal.log if e.type == "tool_call.updated"][-1]
    assert result.status == "failed" and result.error.code == "sandbox_unavailable"  # type: ignore[attr-defined]
    # `--sandbox none` still runs it.
    assert await shell.fn(tool_context(tmp_path, "none"), "touch ran; echo ok") == "ok\n"


def test_the_argv_binds_only_the_workspace_writable(tmp_path: Path) -> None:
    argv = confine(Sandbox("bwrap"), tmp_path, ["/bin/true"], {}).argv
    binds = [argv[i + 1 : i + 3] for i, a in enumerate(argv) if a == "--bind"]
    assert binds == [[str(tmp_path), "/workspace"]]
    assert "--unshare-net" in argv or "--unshare-all" in argv
    assert "--share-net" not in argv
    # The launcher runs first, the command is in its configuration.
    assert argv[argv.index("--") + 1 :][:4] == [sys.executable, "-I", "-S", "-c"]
    assert json.loads(argv[-1])["argv"] == ["/bin/true"]


async def test_cancel_inside_a_turn_is_clean(workdir: Path) -> None:
    agent = dataclasses.replace(default_agent("scripted:test"), tools=_unapproved_shell())
    model = ScriptedModel([ScriptStep(calls=(call("shell", command="sleep 30.81"),))])
    cancel = asyncio.Event()
    loop = make_loop(agent, InMemoryJournal(), workdir, model)  # type: ignore[arg-type]
    task = asyncio.create_task(loop.run("x", cancel=cancel))
    for _ in range(500):
        if processes_running("sleep 30.81"):
            break
        await asyncio.sleep(0.01)
    cancel.set()
    outcome = await asyncio.wait_for(task, 5)
    assert isinstance(outcome, Stopped) and outcome.stop_reason == "cancelled"
    assert processes_running("sleep 30.81") == []
