"""The Matrix bridge under a long turn: room events, action → visible edit lag, bridge CPU.

    python benchmarks/bridge.py [--actions 2000] [--rate 100] [--edit-interval 2.0]

Needs the `matrix` extra (Synapse). A real Synapse (SQLite, loopback), the Host's HTTP app
in this process on a SQLite store, and `nua bridge matrix` as its own process. A person
(plain client-server API) binds a room to the session with `!bind`; then this process
appends a turn of N `message.delta` actions at a steady rate, each carrying its number,
straight to the store (the path a supervisor's writes take). The person's /sync records
when each card edit arrives; an action's lag is the arrival of the first edit showing it
(or a later action) minus the time it was appended. Bridge CPU is its user+system time
from /proc over the turn. Goal (issue 18): one card plus edits at the throttle rate,
≤ 60 events/min. Prints figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._server import (
    TOKEN,
    envelope,
    free_port,
    new_session,
    serving,
    streaming_turn,
    summary_ms,
)

from opennua.bridge import Homeserver

MARK = re.compile(r"\[(\d+)\]")


@dataclass
class Figures:
    actions: int
    seconds: float
    events: int
    messages: int
    edits: int
    events_per_min: float
    lags: list[float]
    cpu_per_1000: float


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _person_sync(
    hs: str, token: str, room: str, bot: str, seen: list[tuple[float, dict[str, Any]]]
) -> None:
    async with httpx.AsyncClient(
        base_url=hs, headers={"Authorization": f"Bearer {token}"}, timeout=40
    ) as http:
        since = None
        while True:
            params: dict[str, Any] = {"timeout": 5000}
            if since:
                params["since"] = since
            body = (await http.get("/_matrix/client/v3/sync", params=params)).json()
            now = time.monotonic()
            since = body["next_batch"]
            events = body.get("rooms", {}).get("join", {}).get(room, {}).get("timeline", {})
            for event in events.get("events", []):
                if event["sender"] == bot:
                    seen.append((now, event))


async def run(
    actions: int = 2000, rate: float = 100.0, edit_interval: float = 2.0, work: Path | None = None
) -> Figures:
    base = work or Path(tempfile.mkdtemp(prefix="nua-bridge-bench-"))
    hs = Homeserver.prepare(base / "synapse", free_port())
    synapse = hs.start()
    bridge: subprocess.Popen[bytes] | None = None
    try:
        bot = hs.register("nua", "bot-pw")
        person = hs.register("bench", "bench-pw")
        (base / "bot.token").write_text(bot["access_token"])
        from opennua.store import open_store

        store = await open_store(f"sqlite:///{base}/nua.db", data_dir=str(base))
        port = free_port()
        async with store, serving(store, port) as running:
            sid = await new_session(store)
            bridge = _start_bridge(base, running.url, hs.url, bot["user_id"], edit_interval)
            auth = {"Authorization": f"Bearer {person['access_token']}"}
            async with httpx.AsyncClient(base_url=hs.url, headers=auth, timeout=30) as http:
                created = await http.post(
                    "/_matrix/client/v3/createRoom",
                    json={"invite": [bot["user_id"]], "is_direct": True},
                )
                room = created.json()["room_id"]
                await _wait_joined(http, room, bot["user_id"])
                send = f"/_matrix/client/v3/rooms/{room}/send/m.room.message/bind"
                await http.put(send, json={"msgtype": "m.text", "body": f"!bind {sid}"})
            seen: list[tuple[float, dict[str, Any]]] = []
            watcher = asyncio.create_task(
                _person_sync(hs.url, person["access_token"], room, bot["user_id"], seen)
            )
            await _until(lambda: any("follows" in e["content"].get("body", "") for _, e in seen))
            seen.clear()
            cpu_before = _cpu_seconds(bridge.pid)
            turn = await streaming_turn(store, sid)
            appended: list[float] = []
            started = time.monotonic()
            for n in range(actions):
                delta = envelope(sid, f"act_d{n}_{sid[4:]}", "message.delta",
                                 {"message_id": "msg_bench", "delta": f"[{n}] "})  # fmt: skip
                delta["turn_id"], delta["run_id"] = turn, "run_" + sid[4:]
                await store.append(sid, [delta])
                appended.append(time.monotonic())
                await asyncio.sleep(max(0.0, started + (n + 1) / rate - time.monotonic()))
            ended = envelope(sid, "act_end" + sid[4:], "turn.ended", {"stop_reason": "end_turn"})
            ended["turn_id"] = turn
            await store.append(sid, [ended])
            await _until(lambda: any("Done" in _body(e) for _, e in seen), timeout=60)
            seconds = time.monotonic() - started
            cpu = _cpu_seconds(bridge.pid) - cpu_before
            _stop(bridge)  # before the Host: its streams close with it, not under it
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
    finally:
        if bridge is not None:
            _stop(bridge)
        Homeserver.stop(synapse)
    edits = [(t, e) for t, e in seen if _is_edit(e)]
    lags = _lags(appended, edits)
    return Figures(
        actions=actions,
        seconds=seconds,
        events=len(seen),
        messages=len(seen) - len(edits),
        edits=len(edits),
        events_per_min=len(seen) / seconds * 60,
        lags=lags,
        cpu_per_1000=cpu / actions * 1000,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        proc.wait(20)


def _start_bridge(
    base: Path, host_url: str, hs_url: str, user: str, edit_interval: float
) -> subprocess.Popen[bytes]:
    with open(base / "bridge.log", "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "opennua.cli", "--url", host_url, "--token", TOKEN,
             "bridge", "matrix", "--homeserver", hs_url, "--user", user,
             "--token-file", str(base / "bot.token"), "--state", str(base / "bridge.db"),
             "--edit-interval", str(edit_interval)],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


def _body(event: dict[str, Any]) -> str:
    content = event.get("content", {})
    return str(content.get("m.new_content", content).get("body", ""))


def _is_edit(event: dict[str, Any]) -> bool:
    return (event["content"].get("m.relates_to") or {}).get("rel_type") == "m.replace"


def _lags(appended: list[float], edits: list[tuple[float, dict[str, Any]]]) -> list[float]:
    """For each action, the first edit that shows it (or a later one), minus its append."""
    shown: list[tuple[float, int]] = []
    for at, event in edits:
        marks = [int(m) for m in MARK.findall(_body(event))]
        shown.append((at, max(marks) if marks else -1))
    lags = []
    i = 0
    for n, t in enumerate(appended):
        while i < len(shown) and shown[i][1] < n:
            i += 1
        if i == len(shown):
            break
        lags.append(shown[i][0] - t)
    return lags


async def _wait_joined(http: httpx.AsyncClient, room: str, bot: str) -> None:
    async def joined() -> bool:
        members = (await http.get(f"/_matrix/client/v3/rooms/{room}/joined_members")).json()
        return bot in members.get("joined", {})

    deadline = time.monotonic() + 60
    while not await joined():
        assert time.monotonic() < deadline, "the bot never joined"
        await asyncio.sleep(0.2)


async def _until(check: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actions", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=100.0, help="actions per second")
    parser.add_argument("--edit-interval", type=float, default=2.0)
    args = parser.parse_args()
    f = asyncio.run(run(args.actions, args.rate, args.edit_interval))
    print(f"turn: {f.actions} message.delta actions in {f.seconds:.1f} s")
    print(f"room events from the bot: {f.events} ({f.messages} message(s), {f.edits} edits)")
    print(f"events per minute: {f.events_per_min:.1f}  (goal ≤ 60)")
    print(f"action → visible edit: {summary_ms(f.lags)}")
    print(f"bridge CPU: {f.cpu_per_1000 * 1000:.0f} ms per 1,000 actions")


if __name__ == "__main__":
    main()
