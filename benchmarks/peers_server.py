"""The same turn on two servers (issue 32): one `nua serve` (SQLite, durable) and the
LangGraph Agent Server as its users run it locally (`langgraph dev`, in-memory runtime),
at N = 1, 10, 100 concurrent sessions / threads, alternating the servers level by level.

    python -m venv .venv-langgraph && .venv-langgraph/bin/pip install -e '.[langgraph-server]'
    python benchmarks/peers_server.py [--seconds 20] [--warmup 5] [--levels 1,10,100]
                                      [--rounds 1] [--only opennua|langgraph]
                                      [--langgraph .venv-langgraph/bin/langgraph]

The LangGraph server lives in a venv of its own: `langgraph-api` pins `jsonschema-rs<0.45`,
the dev extra's schemathesis `>=0.60`.

A turn on both: 10 zero-delay model calls, 10 tool calls, one human approval answered by the
client, every step streamed to the client. opennua: the `scripted:demo` turn
(NUA_DEMO_STEP_DELAY=0) over the session's SSE stream, the approval an answer to its input
request. LangGraph: benchmarks/langgraph_server/graph.py (a scripted chat model, a ToolNode,
`shell` calling `interrupt()`), one `runs/stream` with `updates` + `messages-tuple` until
the interrupt, then a second with `command: {resume}`. A step is one model call: a
`usage.recorded` action for opennua, an `updates` event of the `model` node for LangGraph,
counted when it reaches the client inside the window.

Printed per level: steps/s and turns/s; server CPU seconds per step (utime + stime of the
server's process tree from /proc over the window, children that exited included); stream
events and bytes per step (the SSE bytes as received, and as text once inflated: both
servers are asked for gzip, as a browser asks); and the driver's own CPU seconds per
step: on a two-core machine the clients compete with the server for the CPU.

LangGraph's in-memory runtime is not durable (its dicts are pickled to disk every 10 s,
without fsync); every opennua step is committed to SQLite before it is streamed.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e._proc import Server, free_port

ROOT = Path(__file__).resolve().parent.parent

TASK = "Write the quarterly report"
LG_APP = ROOT / "benchmarks" / "langgraph_server"
LG_MODES = ["updates", "messages-tuple"]
TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Window:
    start: float
    stop: float

    def inside(self) -> bool:
        return self.start <= time.monotonic() < self.stop

    def open(self) -> bool:
        return time.monotonic() < self.stop


@dataclass
class Counts:
    steps: int = 0
    turns: int = 0
    events: int = 0
    bytes: int = 0  # the event stream's text
    wire: int = 0  # what crossed the connection for it: compressed, when it was


def tree_cpu(pid: int) -> float:
    """CPU seconds of `pid` and every live descendant, each with its reaped children's."""
    parents: dict[int, int] = {}
    times: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = sum(int(f) for f in fields[11:15])
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in tree:
                tree.add(child)
                frontier.append(child)
    return sum(times.get(p, 0) for p in tree) / TICK


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def sse(
    http: httpx.AsyncClient, method: str, path: str, counts: Counts, window: Window, **kw: Any
) -> AsyncIterator[tuple[str, Any]]:
    """(event name, decoded data) of an SSE response, its bytes and events counted: as text
    and as received (httpx asks for gzip, as browsers do)."""
    event = "message"
    async with http.stream(method, path, timeout=None, **kw) as response:
        response.raise_for_status()
        received = 0
        async for line in response.aiter_lines():
            inside = window.inside()
            counts.bytes += (len(line) + 1) * inside
            counts.wire += (response.num_bytes_downloaded - received) * inside
            received = response.num_bytes_downloaded
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                counts.events += inside
                yield event, json.loads(line[5:])
                event = "message"


# -- opennua ------------------------------------------------------------------------------


async def _post(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> None:
    """POST with an Idempotency-Key, sent again (same key) across connection errors: at
    N = 100 a pooled connection can be closed by the server as a request goes out on it."""
    key = secrets.token_hex(8)
    for attempt in range(5):
        try:
            sent = await http.post(path, json=body, headers={"Idempotency-Key": key})
            sent.raise_for_status()
            return
        except httpx.TransportError:
            if attempt == 4:
                raise
            await asyncio.sleep(0.2)


async def ours_turns(http: httpx.AsyncClient, sid: str, window: Window, counts: Counts) -> None:
    cursor = [0]  # the last seq seen, kept across a resumed stream
    while window.open():
        await _post(
            http, f"/v1/sessions/{sid}/messages", {"content": [{"type": "text", "text": TASK}]}
        )
        ended = False
        for _ in range(5):  # the stream resumed after the last seq seen, as clients do
            try:
                ended = await _one_turn(http, sid, cursor, window, counts)
                break
            except httpx.TransportError:
                await asyncio.sleep(0.2)
        if not ended:
            raise RuntimeError(f"the turn on {sid} did not end")


async def _one_turn(
    http: httpx.AsyncClient, sid: str, cursor: list[int], window: Window, counts: Counts
) -> bool:
    path = f"/v1/sessions/{sid}/events"
    params = {"after": cursor[0]}
    async for _, action in sse(http, "GET", path, counts, window, params=params):
        if not isinstance(action, dict) or "type" not in action:
            continue
        cursor[0] = action["seq"]
        kind = action["type"]
        if kind == "usage.recorded":
            counts.steps += window.inside()
        elif kind == "input_request.opened":
            rid = action["data"]["request_id"]
            answer = f"/v1/sessions/{sid}/input-requests/{rid}/answer"
            await _post(http, answer, {"option_id": "allow_once"})
        elif kind == "turn.ended":
            counts.turns += window.inside()
            return True
    return False


async def ours_level(url: str, token: str, n: int, window: Window) -> Counts:
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=2 * n + 10, max_keepalive_connections=2 * n + 10)
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits) as http:
        sids = []
        for i in range(n):
            created = await http.post("/v1/sessions", json={"title": f"peers {n}/{i}"})
            created.raise_for_status()
            sids.append(created.json()["session_id"])
        counts = Counts()
        await asyncio.gather(*(ours_turns(http, sid, window, counts) for sid in sids))
        return counts


# -- LangGraph ----------------------------------------------------------------------------


async def lg_turns(http: httpx.AsyncClient, tid: str, window: Window, counts: Counts) -> None:
    path = f"/threads/{tid}/runs/stream"
    while window.open():
        body: dict[str, Any] = {
            "assistant_id": "agent",
            "input": {"messages": [{"role": "user", "content": TASK}]},
            "stream_mode": LG_MODES,
        }
        for _ in range(2):  # the run up to the approval, then the resumed run
            interrupted = False
            async for event, data in sse(http, "POST", path, counts, window, json=body):
                if event == "error":
                    raise RuntimeError(f"langgraph run on {tid}: {data}")
                if event != "updates" or not isinstance(data, dict):
                    continue
                if "model" in data:
                    counts.steps += window.inside()
                if "__interrupt__" in data:
                    interrupted = True
            if not interrupted:
                break
            body = {"assistant_id": "agent", "command": {"resume": "allow_once"}}
            body["stream_mode"] = LG_MODES
        counts.turns += window.inside()


async def lg_level(url: str, n: int, window: Window) -> Counts:
    limits = httpx.Limits(max_connections=2 * n + 10, max_keepalive_connections=2 * n + 10)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as http:
        tids = []
        for _ in range(n):
            created = await http.post("/threads", json={})
            created.raise_for_status()
            tids.append(created.json()["thread_id"])
        counts = Counts()
        await asyncio.gather(*(lg_turns(http, tid, window, counts) for tid in tids))
        return counts


class LangGraphServer:
    """`langgraph dev` on benchmarks/langgraph_server, offline, as its users start it."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> LangGraphServer:
        env = dict(
            os.environ,
            LANGSMITH_TRACING="false",
            LANGGRAPH_CLI_NO_ANALYTICS="1",
            LANGGRAPH_NO_VERSION_CHECK="true",
            NUA_BENCH_LG_DIR=str(self.workdir / "files"),
        )
        args = [self.binary, "dev", "--no-browser", "--no-reload", "--port", str(self.port)]
        # The app's langgraph.json with absolute paths, run from a scratch directory: the
        # in-memory runtime pickles its state into ./.langgraph_api.
        config = json.loads((LG_APP / "langgraph.json").read_text())
        config["dependencies"] = [str(LG_APP)]
        config["graphs"] = {k: str(LG_APP / v) for k, v in config["graphs"].items()}
        (self.workdir / "langgraph.json").write_text(json.dumps(config))
        args += ["--n-jobs-per-worker", "8", "--config", str(self.workdir / "langgraph.json")]
        self.log = self.workdir / "langgraph.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                args, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir
            )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if httpx.get(self.url + "/ok", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"langgraph dev did not start: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


# -- the run ------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    n: int
    counts: Counts
    seconds: float
    server_cpu: float
    driver_cpu: float

    def row(self) -> str:
        c, steps = self.counts, max(self.counts.steps, 1)
        return (
            f"  {self.name:9s} N={self.n:<4d} {c.steps / self.seconds:7.1f} steps/s"
            f" {c.turns / self.seconds:6.2f} turns/s"
            f"  server {self.server_cpu / steps * 1000:6.2f} ms CPU/step"
            f"  {c.events / steps:5.1f} events/step {c.wire / steps / 1024:6.2f} KB/step"
            f" ({c.bytes / steps / 1024:.2f} KB as text)"
            f"  driver {self.driver_cpu / steps * 1000:5.2f} ms CPU/step"
            f"  ({c.steps} steps, {c.turns} turns)"
        )


def measure(
    name: str,
    pid: int,
    n: int,
    warmup: float,
    seconds: float,
    level: Callable[[Window], Awaitable[Counts]],
) -> Result:
    """Run `level` with a window opening after the warm-up; CPU read at its edges."""
    marks: dict[str, tuple[float, float]] = {}

    async def sample(window: Window) -> None:
        await asyncio.sleep(max(0.0, window.start - time.monotonic()))
        marks["start"] = (tree_cpu(pid), self_cpu())
        await asyncio.sleep(max(0.0, window.stop - time.monotonic()))
        marks["stop"] = (tree_cpu(pid), self_cpu())

    async def go() -> Counts:
        start = time.monotonic() + warmup + n / 50
        window = Window(start, start + seconds)
        sampler = asyncio.create_task(sample(window))
        counts = await level(window)
        await sampler
        return counts

    counts = asyncio.run(go())
    (s0, d0), (s1, d1) = marks["start"], marks["stop"]
    return Result(name, n, counts, seconds, s1 - s0, d1 - d0)


def langgraph_binary(given: str | None) -> str | None:
    for candidate in (
        given,
        os.environ.get("NUA_LANGGRAPH_BIN"),
        str(ROOT / ".venv-langgraph" / "bin" / "langgraph"),
        shutil.which("langgraph"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--warmup", type=float, default=5, help="plus 1 s per 50 sessions")
    parser.add_argument("--levels", default="1,10,100")
    parser.add_argument("--rounds", type=int, default=1, help="every level this many times")
    parser.add_argument("--only", choices=("opennua", "langgraph"))
    parser.add_argument("--langgraph", help="the `langgraph` CLI of the LangGraph server venv")
    parser.add_argument(
        "--baseline",
        help="also run `nua serve` from this source tree (its src/ first on PYTHONPATH),"
        " alternated with the others: before/after in the same conditions",
    )
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    binary = None if args.only == "opennua" else langgraph_binary(args.langgraph)
    if args.only != "opennua" and binary is None:
        print(
            "no `langgraph` CLI: python -m venv .venv-langgraph &&"
            " .venv-langgraph/bin/pip install -e '.[langgraph-server]'"
        )
        return 2
    with os.popen("uptime") as up:
        print(f"peers_server: {args.seconds:.0f} s windows, {up.read().strip()}")
    tmp = Path(tempfile.mkdtemp(prefix="nua-peers-server-"))
    ours: list[tuple[str, Server]] = []
    theirs: LangGraphServer | None = None
    try:
        if args.only != "langgraph":
            (tmp / "data").mkdir()
            ours.append(("opennua", Server(tmp / "data", step_delay="0", model="scripted:demo")))
        if args.baseline:
            (tmp / "base").mkdir()
            src = str(Path(args.baseline).resolve() / "src")
            base = Server(
                tmp / "base", step_delay="0", model="scripted:demo", env={"PYTHONPATH": src}
            )
            ours.append(("baseline", base))
        for _, server in ours:
            server.lease_ttl = "15"  # the default lease: the tests' 2 s one churns under load
            server.start()
        if binary is not None:
            (tmp / "lg").mkdir()
            theirs = LangGraphServer(binary, tmp / "lg").start()
        for round_ in range(args.rounds):
            for n in levels:
                # the first level's warm-up also warms the servers up (imports, first loads)
                warm = args.warmup + (3 if round_ == 0 and n == levels[0] else 0)
                for name, server in ours:
                    assert server.proc is not None
                    level = functools.partial(ours_level, server.url, server.token, n)
                    result = measure(name, server.proc.pid, n, warm, args.seconds, level)
                    print(result.row(), flush=True)
                if theirs is not None and theirs.proc is not None:
                    level = functools.partial(lg_level, theirs.url, n)
                    result = measure("langgraph", theirs.proc.pid, n, warm, args.seconds, level)
                    print(result.row(), flush=True)
    finally:
        for _, server in ours:
            server.stop()
        if theirs is not None:
            theirs.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
