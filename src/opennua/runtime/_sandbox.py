"""Running a command confined by bubblewrap, or (mode "none", the operator's choice) not.

Under bubblewrap the command sees the execution's workspace at `/workspace` (the only
writable path that outlives it), `/usr` and a few files of `/etc` read-only, its own
`/proc`, a minimal read-only `/dev`, and scratch `/tmp` and `/dev/shm` that vanish with
it; no data directory, no other process (a new PID namespace: its
`/proc/$PPID/environ` is the sandbox's own, scrubbed environment), no network (a new,
empty network namespace) and no capabilities. When the command's main process exits, or
the call is cancelled or times out, the namespace's init is killed, which kills every
process left in it before its parent can see it exit: nothing outlives the call.

`bwrap_argv` builds the command line (reusable for anything else that must run confined,
such as stdio MCP servers); `run_command` runs one command to its end; `sandbox_problem`
says, once per process, why bubblewrap cannot start here (None: it can).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

SandboxMode = Literal["bwrap", "none"]
SANDBOX_MODES: tuple[SandboxMode, ...] = ("bwrap", "none")
#: Where the workspace appears inside the sandbox (the host path is nobody's business).
WORKSPACE = "/workspace"
#: What programs need from /etc (the dynamic linker's cache, `alternatives` links such as
#: awk, user names, time zone, certificates); never the rest (shadow, the host's config).
_ETC = (
    "alternatives",
    "ca-certificates",
    "group",
    "host.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "ssl",
    "timezone",
)
_TOP = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_status: int
    output: bytes  # stdout and stderr interleaved, at most the cap (then a marker)


class SandboxUnavailable(Exception):
    """Bubblewrap cannot start here; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def bwrap_argv(
    workspace: Path,
    command: Sequence[str],
    *,
    bwrap: str = "bwrap",
    network: bool = False,
    info_fd: int | None = None,
    read_only: Sequence[tuple[Path, str]] = (),
) -> list[str]:
    """The bubblewrap command line that runs `command` confined to `workspace`.

    `network=True` keeps the host's network (for an egress policy that allows it);
    `info_fd` is where bubblewrap writes the sandbox's init PID (JSON, `child-pid`);
    `read_only` binds (host path, sandbox path) pairs read-only (a plugin's directory).
    """
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    if network:
        argv.append("--share-net")
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in _TOP:
        path = Path("/", name)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    for name in _ETC:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    # /tmp and /dev/shm are the sandbox's own scratch space: they vanish with it.
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm", "--tmpfs", "/tmp"]
    argv += ["--bind", str(workspace), WORKSPACE, "--chdir", WORKSPACE]
    for host, inside in read_only:
        argv += ["--ro-bind", str(host), inside]
    argv += ["--remount-ro", "/dev", "--remount-ro", "/"]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    return [*argv, "--", *command]


@functools.cache
def sandbox_problem(mode: SandboxMode) -> str | None:
    """Why commands cannot run in `mode` here, or None when they can. Bubblewrap is tried
    once per process (a command that must succeed), so call this at startup."""
    if mode == "none":
        return None
    path = shutil.which("bwrap")
    if path is None:
        return "bubblewrap (bwrap) is not installed"
    probe = Path(tempfile.gettempdir())
    try:
        done = subprocess.run(
            bwrap_argv(probe, ["/bin/true"], bwrap=path),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap cannot start: {exc}"
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip().splitlines()
        return f"bubblewrap cannot start: {detail[-1] if detail else f'exit {done.returncode}'}"
    return None


async def run_command(
    mode: SandboxMode,
    command: Sequence[str],
    *,
    workspace: Path,
    env: Mapping[str, str],
    output_cap: int,
) -> CommandResult:
    """Run `command` in `workspace` (confined unless `mode` is "none") until it exits.

    Raises `SandboxUnavailable`. When it is cancelled (by the caller's timeout, say), the
    command's whole process tree is killed before the cancellation goes on.
    """
    if mode == "none":
        return await _run_plain(command, workspace, env, output_cap)
    problem = await asyncio.to_thread(sandbox_problem, mode)
    if problem is not None:
        raise SandboxUnavailable(problem)
    bwrap = shutil.which("bwrap") or "bwrap"
    info_read, info_write = os.pipe()
    argv = bwrap_argv(workspace, command, bwrap=bwrap, info_fd=info_write)
    # Starting and learning the sandbox init's PID run apart from the command, shielded: a
    # cancel that lands meanwhile lets them finish, so that the whole sandbox is killed
    # below (asyncio would kill bubblewrap alone, and its sandbox would die a moment later).
    starting = asyncio.ensure_future(_spawn(argv, env, info_write))
    reading = asyncio.ensure_future(_init_pid(info_read))
    proc: asyncio.subprocess.Process | None = None
    init_pid: int | None = None
    try:
        proc = await asyncio.shield(starting)
        init_pid = await asyncio.shield(reading)
        assert proc.stdout is not None
        output = await _read_capped(proc.stdout, output_cap)
        status = await proc.wait()
    except BaseException:
        with contextlib.suppress(BaseException):
            async with asyncio.timeout(5):  # bubblewrap says who its init is, or exits
                if proc is None:
                    proc = await starting  # raises if it could not start: nothing to kill
                if init_pid is None:
                    init_pid = await reading
        if proc is not None:
            await _kill_sandbox(proc, init_pid)
        raise
    finally:
        if not reading.done():
            reading.cancel()
            with contextlib.suppress(BaseException):
                await reading  # off the selector before its fd is closed
        os.close(info_read)
    return CommandResult(status, output)


async def _spawn(
    argv: Sequence[str], env: Mapping[str, str], info_write: int
) -> asyncio.subprocess.Process:
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            pass_fds=(info_write,),
            start_new_session=True,
        )
    finally:
        os.close(info_write)  # bubblewrap has its copy: EOF once it is gone


async def _init_pid(fd: int) -> int | None:
    """The sandbox init's PID from bubblewrap's info fd (None if bubblewrap failed first)."""
    loop = asyncio.get_running_loop()
    os.set_blocking(fd, False)
    data = b""
    while b"}" not in data:
        ready: asyncio.Future[None] = loop.create_future()

        def readable(ready: asyncio.Future[None] = ready) -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(fd, readable)
        try:
            await ready
        finally:
            loop.remove_reader(fd)
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            continue
        if not chunk:
            return None
        data += chunk
    pid = json.loads(data[: data.index(b"}") + 1]).get("child-pid")
    return pid if isinstance(pid, int) else None


async def _kill_sandbox(proc: asyncio.subprocess.Process, init_pid: int | None) -> None:
    # Killing the namespace's init kills everything in it, and bubblewrap (its parent, which
    # has not reaped it yet, so the PID is still its) exits only once they are all gone.
    if init_pid is not None and proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(init_pid, signal.SIGKILL)
        with contextlib.suppress(BaseException):
            async with asyncio.timeout(5):
                await asyncio.shield(proc.wait())
    if proc.returncode is None:
        # No init PID (bubblewrap had not started it), or it would not die: kill bubblewrap,
        # whose death kills the sandbox (--die-with-parent).
        _kill_group(proc)
        with contextlib.suppress(BaseException):
            await asyncio.shield(proc.wait())


async def _run_plain(
    command: Sequence[str], workspace: Path, env: Mapping[str, str], cap: int
) -> CommandResult:
    proc = await asyncio.create_subprocess_exec(
        *command,
        cwd=workspace,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        # Its own process group, so cancel and timeout kill the children it spawned too.
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        output = await _read_capped(proc.stdout, cap)
        status = await proc.wait()
    except BaseException:
        _kill_group(proc)
        with contextlib.suppress(BaseException):
            await asyncio.shield(proc.wait())
        raise
    return CommandResult(status, output)


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> bytes:
    buf = bytearray()
    while chunk := await stream.read(65536):
        if len(buf) < cap:
            buf += chunk[: cap - len(buf)]
    if len(buf) >= cap:
        buf += b"\n[output truncated]"
    return bytes(buf)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
