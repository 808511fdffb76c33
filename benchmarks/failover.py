"""Failover: `kill -9` the supervisor running an execution; another resumes it.

    python benchmarks/failover.py [--ttl 3] [--repeat 3] [--pg postgresql://postgres@127.0.0.1:5432/postgres]

One `nua serve --role host` and two `nua serve --role supervisor` processes share a fresh
PostgreSQL database `nua_bench_<random>` (created here, dropped at the end) and one data
directory, with `--lease-ttl 3` and the demo model slowed to 0.5 s a step
(`NUA_DEMO_STEP_DELAY=0.5`). Each round: create a session, send the demo task, answer its
approval over HTTP, wait until a supervisor claims the re-queued execution (its
`execution.attempt_started`), let it run 0.5 s, then `kill -9` that supervisor and
measure the time until the *other* supervisor's `execution.attempt_started` appears in
the session log: as stamped in the action (`ts`, the new owner's clock) and as first seen
by a client polling `GET /v1/sessions/{sid}/actions` every 20 ms. A replacement supervisor
is started before the next round, so two are always running. Goal (issue 5): ≤ TTL + 2 s.
Prints figures only.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._server import free_port

STEP_DELAY = "0.5"


class Proc:
    def __init__(self, role: str, db: str, data: Path, ttl: float, port: int | None = None):
        self.role = role
        self.log = data / f"{role}-{time.monotonic_ns()}.log"
        args = [
            sys.executable,
            "-m",
            "opennua.cli",
            "serve",
            "--role",
            role,
            "--db",
            db,
            "--data",
            str(data),
            "--lease-ttl",
            str(ttl),
        ]
        if port is not None:
            args += ["--port", str(port)]
        env = dict(os.environ, NUA_DEMO_STEP_DELAY=STEP_DELAY)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.supervisor_id = ""

    def wait_announced(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log.read_text(errors="replace").splitlines():
                if line.startswith("supervisor "):
                    self.supervisor_id = line.split()[1]
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"{self.role} did not start; see {self.log}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def wait_for(predicate: Any, timeout: float, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise TimeoutError(f"condition not met within {timeout} s")


class Log:
    """The session's actions, read incrementally over HTTP."""

    def __init__(self, client: httpx.Client, sid: str) -> None:
        self.client, self.sid = client, sid
        self.actions: list[dict[str, Any]] = []
        self.seen_at: list[float] = []

    def poll(self) -> list[dict[str, Any]]:
        after = len(self.actions)
        page = self.client.get(
            f"/v1/sessions/{self.sid}/actions", params={"after": after, "limit": 1000}
        ).json()["actions"]
        now = time.time()
        self.actions.extend(page)
        self.seen_at.extend([now] * len(page))
        return page

    def find(self, type_: str, **data: Any) -> tuple[dict[str, Any], float] | None:
        self.poll()
        for action, at in zip(self.actions, self.seen_at, strict=True):
            if action["type"] == type_ and all(action["data"].get(k) == v for k, v in data.items()):
                return action, at
        return None


def ts(action: dict[str, Any]) -> float:
    return datetime.fromisoformat(action["ts"].replace("Z", "+00:00")).timestamp()


def round_once(client: httpx.Client, supervisors: list[Proc], n: int) -> dict[str, Any]:
    sid = client.post("/v1/sessions", json={"title": f"failover {n}"}).json()["session_id"]
    accepted = client.post(
        f"/v1/sessions/{sid}/messages", json={"content": [{"type": "text", "text": "report"}]}
    )
    accepted.raise_for_status()
    eid = accepted.json()["execution_id"]
    log = Log(client, sid)
    opened, _ = wait_for(lambda: log.find("input_request.opened"), 60)
    rid = opened["data"]["request_id"]
    answered = client.post(
        f"/v1/sessions/{sid}/input-requests/{rid}/answer", json={"option_id": "allow_once"}
    )
    answered.raise_for_status()
    started, _ = wait_for(lambda: log.find("execution.attempt_started", attempt=2), 30)
    owner = started["data"]["supervisor_id"]
    victim = next(s for s in supervisors if s.supervisor_id == owner)
    time.sleep(0.5)  # mid-run: the shell tool, then the researcher sub-agent
    before = client.get(f"/v1/executions/{eid}").json()
    assert before["owner"] == owner and before["status"] == "running", before
    lease = datetime.fromisoformat(before["lease_expires_at"].replace("Z", "+00:00")).timestamp()
    killed = time.time()
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(10)
    resumed, seen = wait_for(lambda: log.find("execution.attempt_started", attempt=3), 30)
    return {
        "stamped": ts(resumed) - killed,
        "seen": seen - killed,
        "lease_left": lease - killed,
        "from": owner,
        "to": resumed["data"]["supervisor_id"],
        "resumed_from_checkpoint": resumed["data"]["resumed_from_checkpoint"],
        "victim": victim,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ttl", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    name = f"nua_bench_{secrets.token_hex(4)}"
    admin = psycopg.connect(args.pg, autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    db = "postgresql://" + args.pg.split("://", 1)[1].rsplit("/", 1)[0] + "/" + name
    procs: list[Proc] = []
    rounds: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp)
            port = free_port()
            host = Proc("host", db, data, args.ttl, port)
            procs.append(host)
            url = f"http://127.0.0.1:{port}"
            wait_for(lambda: _healthy(url), 30, 0.05)
            supervisors = [Proc("supervisor", db, data, args.ttl) for _ in range(2)]
            procs += supervisors
            for s in supervisors:
                s.wait_announced()
            token = (data / "token").read_text().strip()
            with httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10
            ) as client:
                for n in range(args.repeat):
                    result = round_once(client, supervisors, n)
                    rounds.append(result)
                    supervisors.remove(result["victim"])
                    fresh = Proc("supervisor", db, data, args.ttl)
                    procs.append(fresh)
                    fresh.wait_announced()
                    supervisors.append(fresh)
            for proc in procs:
                proc.stop()
    finally:
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.stop()
        with contextlib.suppress(Exception):
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
    print(
        f"failover: PostgreSQL, 1 host + 2 supervisors, lease TTL {args.ttl:g} s (heartbeat"
        f" every TTL/3), demo step delay {STEP_DELAY} s; {os.cpu_count()} CPUs,"
        f" load average {os.getloadavg()[0]:.2f}; database {name} (dropped)"
    )
    for i, r in enumerate(rounds, 1):
        print(
            f"  round {i}: kill -9 → other supervisor's execution.attempt_started:"
            f" {r['stamped']:.2f} s (its ts), seen by a client after {r['seen']:.2f} s;"
            f" the lease had {r['lease_left']:.2f} s left at the kill;"
            f" resumed_from_checkpoint={r['resumed_from_checkpoint']}"
            f" ({r['from']} → {r['to']})"
        )
    if rounds:
        stamped = [r["stamped"] for r in rounds]
        print(
            f"  median {statistics.median(stamped):.2f} s, max {max(stamped):.2f} s"
            f" (TTL + 2 s = {args.ttl + 2:g} s)"
        )
    print("goal (issue 5): <= TTL + 2 s")


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


if __name__ == "__main__":
    main()
