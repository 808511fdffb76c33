"""A2A through the official client: time to first event and events/s of the demo turn.

    python benchmarks/protocols_a2a.py [--turns 5]

Starts `nua serve` (SQLite, the zero-delay scripted demo) and drives its A2A endpoint
with `a2a-sdk`'s client, as another agent would: `SendStreamingMessage` of the demo task
(plan, tools, a sub-agent, an approval), then the answer to its approval streamed to the
task's completion. Time to first event: from the request to the first SSE event (the
task, once the Host accepted the message). Events/s: every event both streams carried,
over their wall time (the demo's own pace included: it is what a caller sees).
`measure()` is what benchmarks/protocols.py aggregates beside our own SSE. Prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e._proc import Server

DEMO = "Write a short report"


def _message(text: str, task_id: str = "", context_id: str = "") -> SendMessageRequest:
    message = Message(
        message_id=f"bench-{uuid.uuid4().hex}",
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )
    return SendMessageRequest(message=message)


async def measure(base_url: str, token: str, deployment: str, turns: int) -> dict[str, float]:
    """`turns` demo tasks through `deployment`'s A2A endpoint, one after another:
    `first_event_p50_ms` and `first_event_max_ms` (request to first SSE event),
    `events_per_s` (both streams of a task, approval answered), `events_per_turn` and
    `turn_s_p50` (a task's wall time)."""
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    firsts: list[float] = []
    counts: list[int] = []
    walls: list[float] = []
    try:
        factory = ClientFactory(ClientConfig(httpx_client=http, streaming=True))
        client = await factory.create_from_url(f"{base_url}/v1/a2a/{deployment}")
        for _ in range(turns):
            started = time.perf_counter()
            events = 0
            task_id = context_id = ""
            async for event in client.send_message(_message(DEMO)):
                if events == 0:
                    firsts.append(time.perf_counter() - started)
                    task_id, context_id = event.task.id, event.task.context_id
                events += 1
            last = None
            async for event in client.send_message(_message("allow_once", task_id, context_id)):
                events += 1
                last = event
            walls.append(time.perf_counter() - started)
            counts.append(events)
            final = last is not None and last.HasField("status_update")
            state = last.status_update.status.state if final and last else None
            if state != TaskState.TASK_STATE_COMPLETED:
                raise RuntimeError(f"the demo task ended in {state}, not completed")
        await client.close()
    finally:
        await http.aclose()
    return {
        "first_event_p50_ms": statistics.median(firsts) * 1000,
        "first_event_max_ms": max(firsts) * 1000,
        "events_per_s": sum(counts) / sum(walls),
        "events_per_turn": statistics.mean(counts),
        "turn_s_p50": statistics.median(walls),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        server = Server(Path(data), step_delay="0", model="scripted:demo").start()
        try:
            figures = asyncio.run(measure(server.url, server.token, "default", args.turns))
        finally:
            server.stop()
    print(f"A2A (a2a-sdk client, SendStreamingMessage), {args.turns} demo tasks:")
    print(f"  time to first event p50: {figures['first_event_p50_ms']:.1f} ms")
    print(f"  events/s: {figures['events_per_s']:.1f} ({figures['events_per_turn']:.0f} per task)")
    print(f"  task wall time p50: {figures['turn_s_p50']:.2f} s")


if __name__ == "__main__":
    main()
