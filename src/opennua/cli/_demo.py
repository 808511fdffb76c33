"""`nua demo`: the whole story in one command.

Uses the server the other commands would use if one answers; otherwise starts
`nua serve` as a child process on the data directory, runs the demo task with the live
view (it asks for approval of a shell command), and stops the child at the end. The
child is a separate process on purpose: Ctrl-C detaches this client the same way it does
for `nua run`, and the log under the data directory shows the server's side.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Annotated, BinaryIO

import typer

from opennua.client import connect

from ._context import DEFAULT_PORT, ExitCode, Settings, execute, fail, settings
from ._run import _Attached, _detached, _prompt_default, run_task
from ._safe import SafeText

DEMO_PROMPT = "Write a short report on why durable agent sessions matter."


def _reachable(config: Settings) -> bool:
    async def probe() -> bool:
        async with connect(config.url, config.token, timeout=2) as client:
            return await client.health()

    return asyncio.run(probe())


# The login link `nua serve` prints carries the owner token.
_TOKEN_IN_LINK = re.compile(rb"(/login\?token=)[^\s&]+")


def _open_log(path: Path) -> BinaryIO:
    """The server's log, readable by this user only whatever the umask (and an older,
    more open one closed down)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


def _copy_redacted(source: IO[bytes], log: BinaryIO, child: _Child | None = None) -> None:
    """Copy the server's output into its log line by line, the token cut out of the login
    link: a log is what people paste into bug reports. The banner's `sandbox:` line is
    kept for the demo to show."""
    with source, log:
        for line in iter(source.readline, b""):
            if child is not None and line.startswith(b"sandbox: "):
                child.sandbox = line.decode(errors="replace").strip()
                child.announced.set()
            log.write(_TOKEN_IN_LINK.sub(rb"\1<the token in DATA/token>", line))
            log.flush()
    if child is not None:
        child.announced.set()


class _Child:
    """`nua serve` as the demo's child process, its output copied into its log."""

    def __init__(self, data: Path, port: int) -> None:
        args = [sys.executable, "-m", "opennua.cli", "serve", "--data", str(data)]
        log = _open_log(data / "demo-serve.log")
        #: The banner's line saying which confinement runs the demo's shell command.
        self.sandbox = ""
        self.announced = threading.Event()
        self.proc = subprocess.Popen(
            [*args, "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert self.proc.stdout is not None
        self._copier = threading.Thread(
            target=_copy_redacted, args=(self.proc.stdout, log, self), daemon=True
        )
        self._copier.start()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._copier.join(5)  # the server's last lines reach the log


def _start_server(config: Settings, port: int) -> _Child:
    data = config.data_dir
    data.mkdir(parents=True, exist_ok=True)
    child = _Child(data, port)
    config.url_option = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if child.proc.poll() is not None:
            child.stop()
            raise fail(
                config, f"nua serve exited; see {data / 'demo-serve.log'}", ExitCode.UNREACHABLE
            )
        if (data / "token").exists() and _reachable(config):
            return child
        time.sleep(0.2)
    child.stop()
    raise fail(config, "nua serve did not start within 30 s", ExitCode.UNREACHABLE)


def demo(
    ctx: typer.Context,
    prompt_text: Annotated[str, typer.Option("--prompt-text", help="The task.")] = DEMO_PROMPT,
    port: Annotated[int, typer.Option(help="Port for the server the demo starts.")] = DEFAULT_PORT,
    prompt: Annotated[
        bool | None,
        typer.Option("--prompt/--no-prompt", help="Ask here for approval (default: on a TTY)."),
    ] = None,
) -> None:
    """Run the demo task live (plan, tools, an approval, a sub-agent, an artifact).

    Starts `nua serve` for the duration when none is running.
    """
    config = settings(ctx)
    child = None if _reachable(config) else _start_server(config, port)
    if child is not None:
        config.stderr.print(
            SafeText(
                f"started nua serve (pid {child.proc.pid}) on {config.url}, data in "
                f"{config.data_dir}; it stops when the demo ends\n"
                f"web UI: {config.url}/ (log in with the token in {config.data_dir / 'token'})",
                style="dim",
            ),
            soft_wrap=True,
        )
        child.announced.wait(10)  # the banner follows the server's start by a moment
        if child.sandbox:
            # Which confinement runs the demo's shell command, or plainly that none can.
            unavailable = "UNAVAILABLE" in child.sandbox
            config.stderr.print(
                SafeText(child.sandbox, style="bold red" if unavailable else "dim"),
                soft_wrap=True,
            )
    attached = _Attached()

    def interrupted() -> int:
        code = _detached(config, attached)
        if child is not None:
            config.stderr.print(
                "the demo's server is stopping; the task is safe in its store. Resume it with\n"
                f"  nua serve --data {config.data_dir} --port {port}   (then)   "
                f"nua attach {attached.session_id}",
                soft_wrap=True,
            )
        return code

    try:
        execute(
            ctx,
            lambda client, cfg: run_task(
                client,
                cfg,
                prompt_text,
                session_id=None,
                title="demo",
                detach=False,
                json_lines=False,
                if_busy="enqueue",
                prompt=_prompt_default(prompt, False),
                reasoning=False,
                attached=attached,
            ),
            on_interrupt=interrupted,
        )
    finally:
        if child is not None:
            child.stop()
            config.stderr.print(
                SafeText(
                    "stopped the demo's server. Next: `nua serve` in one terminal and "
                    '`nua run "…"` in another (see docs/cli.md).',
                    style="dim",
                ),
                soft_wrap=True,
            )
