"""Time to first event and events per second through each client protocol, beside our own
SSE stream, on one `nua serve` running the zero-delay demo.

    python benchmarks/protocols.py [--turns 5] [--only sse,agui,a2a,acp]

Each protocol runs one warm-up turn, then the same demo turn (streamed to its approval,
answered, streamed to its end) `--turns` times, each on a new session. "First event" is
from sending the turn's request to the first event the client receives for it; "events/s"
counts what the client received over the time it spent streaming. The protocols count
different things as an event (an AG-UI turn is ~190 events, an action stream ~100 actions),
so compare first-event times across columns and events/s within one. The demo's pace, not
the endpoint, bounds events/s: the figures say what a protocol costs over our SSE, not the
server's capacity (benchmarks/scale.py and peers_server.py say that). Wall clock on the
client, loopback; the server and the clients share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._server import serve_demo

DEMO = "Write a short report"

#: protocol -> (module in benchmarks/, its first-event key, its events/s key)
PROTOCOLS = {
    "agui": ("protocols_agui", "first_event_p50_ms", "events_per_s"),
    "a2a": ("protocols_a2a", "first_event_p50_ms", "events_per_s"),
    "acp": ("protocols_acp", "first_update_p50_ms", "updates_per_s"),
}


async def measure_sse(base_url: str, token: str, deployment: str, turns: int) -> dict[str, float]:
    """Our own stream: a message, then `GET /v1/sessions/{sid}/events` to the turn's end,
    the approval answered by `POST …/answer` when it is opened."""
    firsts: list[float] = []
    counted = 0
    streaming = 0.0
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=120) as http:
        for _ in range(turns):
            created = await http.post("/v1/sessions", json={"deployment": deployment or None})
            sid = created.raise_for_status().json()["session_id"]
            started = time.perf_counter()
            sent = await http.post(
                f"/v1/sessions/{sid}/messages", json={"content": [{"type": "text", "text": DEMO}]}
            )
            sent.raise_for_status()
            first = 0.0
            async with http.stream("GET", f"/v1/sessions/{sid}/events") as stream:
                stream.raise_for_status()
                async for line in stream.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    action = json.loads(line[5:])
                    counted += 1
                    if not first:
                        first = time.perf_counter() - started
                    if action["type"] == "input_request.opened":
                        rid = action["data"]["request_id"]
                        answered = await http.post(
                            f"/v1/sessions/{sid}/input-requests/{rid}/answer",
                            json={"option_id": "allow_once"},
                        )
                        answered.raise_for_status()
                    elif action["type"] == "turn.ended":
                        break
            firsts.append(first)
            streaming += time.perf_counter() - started
    return {
        "first_event_p50_ms": statistics.median(firsts) * 1000,
        "events_per_s": counted / streaming if streaming else 0.0,
    }


Measure = Callable[[str, str, str, int], Awaitable[dict[str, float]]]


def _measurers(only: list[str]) -> dict[str, tuple[Measure, str, str]]:
    out: dict[str, tuple[Measure, str, str]] = {}
    for name in only:
        if name == "sse":
            out[name] = (measure_sse, "first_event_p50_ms", "events_per_s")
            continue
        module, first, rate = PROTOCOLS[name]
        out[name] = (importlib.import_module(f"benchmarks.{module}").measure, first, rate)
    return out


def run(turns: int, only: list[str]) -> dict[str, dict[str, Any]]:
    """Every protocol's figures from one server, in the order asked."""
    measurers = _measurers(only)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = serve_demo(Path(tmp))
        try:
            token = (Path(tmp) / "token").read_text().strip()
            for name, (measure, first, rate) in measurers.items():
                # One turn first: the server's and the protocol's first turn pays imports
                # and the demo plugin's start, which is not what a client waits for later.
                asyncio.run(measure(url, token, "default", 1))
                got = asyncio.run(measure(url, token, "default", turns))
                results[name] = {"first_event_ms": got[first], "events_per_s": got[rate]}
        finally:
            proc.terminate()
            proc.wait(30)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--only", default="sse," + ",".join(PROTOCOLS))
    args = parser.parse_args()
    only = [p for p in args.only.split(",") if p]
    unknown = set(only) - {"sse", *PROTOCOLS}
    if unknown:
        raise SystemExit(f"unknown protocol: {', '.join(sorted(unknown))}")
    load = os.getloadavg()[0]
    results = run(args.turns, only)
    print(f"{args.turns} demo turns per protocol, zero-delay demo, load average {load:.1f}")
    print(f"{'protocol':<10} {'first event p50':>16} {'events/s':>10}")
    for name, figures in results.items():
        print(f"{name:<10} {figures['first_event_ms']:>13.1f} ms {figures['events_per_s']:>10.1f}")


if __name__ == "__main__":
    main()
