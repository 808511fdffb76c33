"""`python -m feedback_desk demo` (or `feedback-desk demo`): the whole thing on one machine.

Starts `nua serve` (unless `--url` names a running one), the scripted model (unless
`--model` names a real provider's), the desk; publishes and deploys the feedback plugin,
subscribes the desk to deliveries, loads sample tickets, dispatches the new ones and
prints the URLs. `feedback-desk serve` runs the desk alone against a provisioned runtime.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import uvicorn

from feedback_desk import samples
from feedback_desk.app import Desk, DeskConfig, create_app
from feedback_desk.dispatch import Runtime, dispatch
from feedback_desk.provision import DEPLOYMENT, Nua, provision
from feedback_desk.scripted_model import ScriptedModel

SCRIPTED = "openai:feedback-scripted"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_nua_serve(data: Path, port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """`nua serve` on `port`, its data in `data`; returns once it answers /healthz."""
    data.mkdir(parents=True, exist_ok=True)
    nua = Path(sys.executable).with_name("nua")
    args = [str(nua) if nua.exists() else "nua", "serve", "--data", str(data), "--port", str(port)]
    # The desk listens on this machine: let deliveries reach a private address.
    args.append("--allow-private-subscriptions")
    with (data / "serve.log").open("ab") as log:
        proc = subprocess.Popen(args, env=dict(os.environ) | env, stdout=log, stderr=log)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"nua serve exited {proc.returncode}: see {data / 'serve.log'}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("nua serve did not become healthy in 90 s")


async def run_desk(desk: Desk, port: int) -> tuple[uvicorn.Server, asyncio.Task[None]]:
    server = uvicorn.Server(
        uvicorn.Config(desk, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    task = asyncio.get_running_loop().create_task(server.serve())
    # uvicorn says it started only by this flag
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.05)
    return server, task


async def demo(args: argparse.Namespace, data: Path) -> None:
    model = None
    env: dict[str, str] = {}
    if args.model == SCRIPTED:
        model = ScriptedModel().start()
        env = model.env()
    proc = None
    if args.url:
        url, token = args.url, args.token or os.environ.get("NUA_TOKEN", "")
    else:
        port = free_port()
        proc = await asyncio.to_thread(start_nua_serve, data / "nua", port, env)
        url, token = f"http://127.0.0.1:{port}", (data / "nua" / "token").read_text().strip()
    desk_port = args.port or free_port()
    desk_url = f"http://127.0.0.1:{desk_port}"
    desk = create_app(DeskConfig(data / "desk.sqlite3", runtime=Runtime(url, token, DEPLOYMENT)))
    password = args.password or secrets.token_urlsafe(9)
    desk.db.add_user("reviewer", password)
    opened = samples.load(desk.db)
    server, serving = await run_desk(desk, desk_port)
    try:
        await asyncio.to_thread(provision, Nua(url, token), desk.db, desk_url, model=args.model)
        runtime = Runtime(url, token, DEPLOYMENT)
        try:
            for ticket_id in opened:
                await dispatch(desk.db, runtime, ticket_id)
        finally:
            await runtime.aclose()
        print(f"opennua        {url}  (web UI; token in {data / 'nua' / 'token'})")
        print(f"feedback form  {desk_url}/")
        print(f"reviewer desk  {desk_url}/desk   user reviewer, password {password}")
        for ticket_id in opened:
            ticket = desk.db.ticket(ticket_id)
            assert ticket is not None
            print(f"submitter page {desk_url}/t/{ticket['public_token']}  ({ticket_id})")
        print("Ctrl-C stops everything.", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        server.should_exit = True
        await serving
        if proc is not None:
            proc.terminate()
            proc.wait(15)
        if model is not None:
            model.stop()


async def serve(args: argparse.Namespace, data: Path) -> None:
    token = args.token or os.environ.get("NUA_TOKEN", "")
    runtime = Runtime(args.url, token, args.deployment)
    config = DeskConfig(
        args.database or data / "desk.sqlite3",
        runtime=runtime,
        background_limit=args.background_limit,
    )
    desk = create_app(config)
    if args.reviewer:
        user, _, password = args.reviewer.partition(":")
        desk.db.add_user(user, password)
    samples.load(desk.db, new=False)
    server = uvicorn.Server(
        uvicorn.Config(desk, host=args.host, port=args.port, log_level="warning")
    )
    await server.serve()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="feedback-desk")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="start nua serve, the desk and sample tickets")
    d.add_argument("--url", help="a running opennua server (default: start one)")
    d.add_argument("--token", help="its token (default: $NUA_TOKEN)")
    d.add_argument("--model", default=SCRIPTED, help=f"the plugin's model (default {SCRIPTED})")
    d.add_argument("--data", default="feedback-desk-data", help="where the data goes")
    d.add_argument("--port", type=int, default=8800, help="the desk's port")
    d.add_argument("--password", help="the reviewer's password (default: generated)")
    s = sub.add_parser("serve", help="run the desk against a provisioned opennua")
    s.add_argument("--url", required=True)
    s.add_argument("--token", help="default: $NUA_TOKEN (better: argv is visible in ps)")
    s.add_argument("--data", default="feedback-desk-data")
    s.add_argument("--database", help="a postgresql:// URL (default: SQLite in --data)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8800)
    s.add_argument("--reviewer", help="USER:PASSWORD to create or reset")
    s.add_argument(
        "--deployment", default=DEPLOYMENT, help=f"where tickets run (default {DEPLOYMENT})"
    )
    s.add_argument(
        "--background-limit", type=int, default=2, help="open dispatches at most (default 2)"
    )
    args = parser.parse_args(argv)
    data = Path(args.data).resolve()
    data.mkdir(parents=True, exist_ok=True)
    asyncio.run(demo(args, data) if args.command == "demo" else serve(args, data))


if __name__ == "__main__":
    main()
