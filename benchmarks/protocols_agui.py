"""AG-UI: time to first event and events per second through `POST /v1/agui/{deployment}`
for the demo turn (benchmarks/protocols.py sets these beside our own SSE).

    python benchmarks/protocols_agui.py --url http://127.0.0.1:7421 --token T [--turns 5]

Each turn is a new thread: one run with the demo message (it streams until the approval
ends it with an interrupt), then a run that resumes with `allow_once` and streams to the
turn's end. Time to first event: from sending the first run's request to its first event
(`RUN_STARTED`), so it includes creating the thread's session and accepting the turn.
Events per second: every event of both runs over the time spent streaming them. Wall
clock on the client over loopback; the demo's step delay (`NUA_DEMO_STEP_DELAY`) sets
the agent's pace, so run the server with 0 to measure the endpoint rather than the agent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from typing import Any

import httpx

DEMO = "Write a short report"


async def _run(
    http: httpx.AsyncClient, url: str, body: dict[str, Any]
) -> tuple[float, list[dict[str, Any]], float]:
    """(seconds to the first event, the events, seconds to the last) of one run."""
    started = time.perf_counter()
    first = 0.0
    events: list[dict[str, Any]] = []
    async with http.stream("POST", url, json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            if not events:
                first = time.perf_counter() - started
            events.append(json.loads(line[5:]))
    return first, events, time.perf_counter() - started


async def measure(base_url: str, token: str, deployment: str, turns: int) -> dict[str, float]:
    """`first_event_p50_ms`, `first_event_max_ms`, `events_per_s` and `events_per_turn`
    over `turns` demo turns, each on a new thread."""
    url = f"{base_url}/v1/agui/{deployment}"
    firsts: list[float] = []
    counted = 0
    streaming = 0.0
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=120) as http:
        for _ in range(turns):
            thread = f"bench-{uuid.uuid4().hex}"
            message = {"id": uuid.uuid4().hex, "role": "user", "content": DEMO}
            body = {"threadId": thread, "runId": uuid.uuid4().hex, "messages": [message]}
            first, events, took = await _run(http, url, body)
            firsts.append(first)
            counted += len(events)
            streaming += took
            outcome = events[-1].get("outcome") or {}
            while outcome.get("type") == "interrupt":
                resume = [
                    {
                        "interruptId": i["id"],
                        "status": "resolved",
                        "payload": {"option_id": "allow_once"},
                    }
                    for i in outcome["interrupts"]
                ]
                body = {
                    "threadId": thread,
                    "runId": uuid.uuid4().hex,
                    "messages": [],
                    "resume": resume,
                }
                _, events, took = await _run(http, url, body)
                counted += len(events)
                streaming += took
                outcome = events[-1].get("outcome") or {}
            if events[-1]["type"] != "RUN_FINISHED":
                raise RuntimeError(f"the demo turn did not finish: {events[-1]}")
    return {
        "first_event_p50_ms": statistics.median(firsts) * 1000,
        "first_event_max_ms": max(firsts) * 1000,
        "events_per_s": counted / streaming if streaming else 0.0,
        "events_per_turn": counted / turns,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--deployment", default="default")
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()
    figures = asyncio.run(measure(args.url, args.token, args.deployment, args.turns))
    for name, value in figures.items():
        print(f"{name}: {value:.1f}")


if __name__ == "__main__":
    main()
