"""`nua demo`: the whole story in one command.

Uses the server the other commands would use if one answers; otherwise starts
`nua serve` as a child process on the data directory, runs the demo task with the live
view (it asks for approval of a shell command), and stops the child at the end. The
child is a separate process on purpose: Ctrl-C detaches this client the same way it does
for `nua run`, and the log under the data directory shows the server's side.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from typing import Annotated

import typer
from rich.text import Text

from opennua.client import connect

from ._context import DEFAULT_PORT, ExitCode, Settings, execute, fail, settings
from ._run import _Attached, _detached, _prompt_default, run_task

DEMO_PROMPT = "Write a short report on why durable agent sessions matter."


def _reachable(config: Settings) -> bool:
    async def probe() -> bool:
        async with connect(config.url, config.token, timeout=2) as client:
            return await client.health()

    return asyncio.run(probe())


def _start_server(config: Settings, port: int) -> subprocess.Popen[bytes]:
    data = config.data_dir
    data.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "opennua.cli", "serve", "--data", str(data), "--port", str(port)]
    log = (data / "demo-serve.log").open("ab")
    try:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    finally:
        log.close()
    config.url_option = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise fail(
                config, f"nua serve exited; see {data / 'demo-serve.log'}", ExitCode.UNREACHABLE
            )
        if (data / "token").exists() and _reachable(config):
            return proc
        time.sleep(0.2)
    _stop(proc)
    raise fail(config, "nua serve did not start within 30 s", ExitCode.UNREACHABLE)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


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
            Text(
                f"started nua serve (pid {child.pid}) on {config.url}, data in "
                f"{config.data_dir}; it stops when the demo ends",
                style="dim",
            ),
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
            _stop(child)
            config.stderr.print(
                Text(
                    "stopped the demo's server. Next: `nua serve` in one terminal and "
                    '`nua run "…"` in another (see docs/cli.md).',
                    style="dim",
                ),
                soft_wrap=True,
            )
