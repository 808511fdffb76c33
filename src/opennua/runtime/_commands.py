"""Running one command to its end, confined (`_sandbox`) or, the operator's choice, not.

When the command's main process exits, or the call is cancelled or times out, the
sandbox's PID namespace ends, which kills every process left in it before its parent can
see it exit: nothing outlives the call. Under bubblewrap the namespace's init is killed
(bubblewrap tells its PID on an info fd); under Landlock the launcher's process group
(the namespace's first process dies with the launcher).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from opennua.runtime._sandbox import (
    Launch,
    Sandbox,
    SandboxUnavailable,
    confine,
    finish,
    prepare,
    sandbox_problem,
)


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_status: int
    #: stdout and stderr interleaved (stderr apart when asked for), at most the cap each
    #: (then a marker).
    output: bytes
    errors: bytes = b""


@dataclass(frozen=True, slots=True)
class Streams:
    """What a command reads on stdin, and whether its stderr is kept apart (a hook's
    reason) rather than interleaved with stdout."""

    stdin: bytes | None = None
    stderr_apart: bool = False


_PLAIN = Streams()


async def run_command(
    sandbox: Sandbox,
    command: Sequence[str],
    *,
    workdir: Path,
    env: Mapping[str, str],
    output_cap: int,
    read_only: Sequence[tuple[Path, str]] = (),
    streams: Streams = _PLAIN,
) -> CommandResult:
    """Run `command` in `workspace` (confined unless the mode is "none") until it exits;
    `read_only` binds (host path, bubblewrap path) pairs read-only (a plugin's directory).

    Raises `SandboxUnavailable`. When it is cancelled (by the caller's timeout, say), the
    command's whole process tree is killed before the cancellation goes on.
    """
    if sandbox.mode == "none":
        return await _run_plain(command, workdir, env, output_cap, streams)
    problem = await asyncio.to_thread(sandbox_problem, sandbox.mode)
    if problem is not None:
        raise SandboxUnavailable(problem)
    await asyncio.to_thread(prepare, sandbox, workdir)
    info_read, info_write = os.pipe() if sandbox.mode == "bwrap" else (-1, -1)
    launch = confine(
        sandbox,
        workdir,
        command,
        env,
        read_only=read_only,
        info_fd=info_write if info_write >= 0 else None,
    )
    # Starting and learning the sandbox init's PID run apart from the command, shielded: a
    # cancel that lands meanwhile lets them finish, so that the whole sandbox is killed
    # below (asyncio would kill bubblewrap alone, and its sandbox would die a moment later).
    starting = asyncio.ensure_future(_spawn(launch, workdir, info_write, streams))
    reading = asyncio.ensure_future(_init_pid(info_read))
    proc: asyncio.subprocess.Process | None = None
    init_pid: int | None = None
    try:
        proc = await asyncio.shield(starting)
        init_pid = await asyncio.shield(reading)
        result = await _communicate(proc, output_cap, streams)
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
        if info_read >= 0:
            os.close(info_read)
        finish(launch)
    return result


async def _communicate(
    proc: asyncio.subprocess.Process, cap: int, streams: Streams
) -> CommandResult:
    """Feed stdin while reading stdout (and stderr): a program that answers before it
    has read all its input must not deadlock on a full pipe."""

    async def feed() -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(streams.stdin or b"")
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # it did not read its input: its business
        finally:
            proc.stdin.close()

    async def nothing() -> bytes:
        return b""

    assert proc.stdout is not None
    feeding = asyncio.ensure_future(feed()) if streams.stdin is not None else None
    try:
        output, errors = await asyncio.gather(
            _read_capped(proc.stdout, cap),
            _read_capped(proc.stderr, cap) if proc.stderr is not None else nothing(),
        )
        status = await proc.wait()
    finally:
        if feeding is not None:
            feeding.cancel()
            with contextlib.suppress(BaseException):
                await feeding
    return CommandResult(status, output, errors)


async def _spawn(
    launch: Launch, workdir: Path, info_write: int, streams: Streams
) -> asyncio.subprocess.Process:
    try:
        return await asyncio.create_subprocess_exec(
            *launch.argv,
            env=launch.env,
            cwd=workdir,
            stdin=asyncio.subprocess.DEVNULL if streams.stdin is None else asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE if streams.stderr_apart else asyncio.subprocess.STDOUT,
            pass_fds=(info_write,) if info_write >= 0 else (),
            start_new_session=True,
        )
    finally:
        if info_write >= 0:
            os.close(info_write)  # bubblewrap has its copy: EOF once it is gone


async def _init_pid(fd: int) -> int | None:
    """The sandbox init's PID from bubblewrap's info fd (None if bubblewrap failed first,
    or for Landlock, which has no info fd)."""
    if fd < 0:
        return None
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
        # No init PID (Landlock, or bubblewrap had not started it), or it would not die:
        # kill the group, whose leader's death ends the sandbox (--die-with-parent, or the
        # namespace's first process's parent-death signal).
        _kill_group(proc)
        with contextlib.suppress(BaseException):
            await asyncio.shield(proc.wait())


async def _run_plain(
    command: Sequence[str], workdir: Path, env: Mapping[str, str], cap: int, streams: Streams
) -> CommandResult:
    proc = await asyncio.create_subprocess_exec(
        *command,
        cwd=workdir,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL if streams.stdin is None else asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE if streams.stderr_apart else asyncio.subprocess.STDOUT,
        # Its own process group, so cancel and timeout kill the children it spawned too.
        start_new_session=True,
    )
    try:
        return await _communicate(proc, cap, streams)
    except BaseException:
        _kill_group(proc)
        with contextlib.suppress(BaseException):
            await asyncio.shield(proc.wait())
        raise


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
