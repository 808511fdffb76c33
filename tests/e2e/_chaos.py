"""Chaos on real processes (issue 20), shared by tests/e2e/test_chaos.py and
benchmarks/chaos.py.

A deployment as users run it: a private PostgreSQL cluster (`_pgcluster`), 2 `nua serve
--role host` behind nginx (docs/deploy/nginx.conf), 3 `--role supervisor`, one data
directory. `sessions` clients each run the demo task back to back through nginx; every
input request it opens is answered by two bots racing each other. Meanwhile a seeded
schedule kills (-9) and pauses (SIGSTOP … SIGCONT) supervisors and hosts, and kills the
postmaster (-9) then starts it again. A watchdog restarts any process that exits on its
own (what systemd's `Restart=always` would do) and counts it.

After the window every process is resumed, the clients finish, and `check` verifies from
the log and the demo's side-effect file (`checks.log` in the session's workspace, one
line per run of the approved command): every session completed or is resumable; each
approved command ran once; seqs gapless and action ids unique; one resolution per input
request, the one bot that won told so and every loser told the winner; every client's
folded state equal to the replay of the log and to the Host's snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from opennua.protocol import action_from_dict, initial_state, reduce, replay, state_to_json
from tests._support.polling import wait_for
from tests.e2e._pgcluster import PgCluster
from tests.e2e._proc import free_port, nginx_binary, write_nginx_conf

TASK = "Write the quarterly report"
#: The approved shell command of the demo appends one line per run to this file.
SIDE_EFFECT = "checks.log"
RETRYABLE = {502, 503, 504}
#: A Host that died holding an idempotency key frees it after 60 s (its lease); past
#: this a key still in flight would be stuck, and is counted (it should stay 0).
IN_FLIGHT_PATIENCE = 150.0
STUCK = "stuck in flight"


@dataclass
class Config:
    sessions: int = 100
    seconds: float = 300
    seed: int = 20
    #: After the fault window: how long the clients get to finish.
    settle: float = 240
    lease_ttl: float = 3
    step_delay: str = "0.1"
    #: Seconds between two faults, drawn uniformly.
    fault_gap: tuple[float, float] = (3.0, 8.0)
    #: Probability a bot approves a tool call / confirms a retry.
    approve: float = 0.9
    poll: float = 1.0


@dataclass
class Fault:
    kind: str
    target: str
    at: float
    until: float = 0.0
    supervisor_id: str | None = None


class Proc:
    """One long-lived process that the schedule may kill, pause and restart."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], logs: Path) -> None:
        self.name, self.args, self.env, self.logs = name, args, env, logs
        self.proc: subprocess.Popen[bytes] | None = None
        self.log: Path = logs / f"{name}.log"
        self.starts = 0
        self.stopped = False
        self.supervisor_id: str | None = None

    def start(self) -> None:
        self.starts += 1
        self.log = self.logs / f"{self.name}-{self.starts}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.args, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        self.stopped = False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        if self.proc is not None and self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
        self.stopped = False

    def pause(self) -> None:
        if self.proc is not None and self.alive():
            self.proc.send_signal(signal.SIGSTOP)
            self.stopped = True

    def resume(self) -> None:
        if self.proc is not None and self.alive():
            self.proc.send_signal(signal.SIGCONT)
        self.stopped = False

    def announced(self) -> str | None:
        """A supervisor's id, once it has printed `supervisor sup_…`."""
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("supervisor sup_"):
                self.supervisor_id = line.split()[1]
                return self.supervisor_id
        return None

    def terminate(self) -> None:
        if self.proc is not None and self.alive():
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def _healthy(url: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url + "/healthz", timeout=2).status_code == 200
    return False


class Deployment:
    """The processes; `ensure` (re)starts whatever is not running."""

    def __init__(self, cluster: PgCluster, db: str, work: Path, config: Config) -> None:
        self.cluster = cluster
        self.work = work
        self.data = work / "data"
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.edge = free_port()
        self.url = f"http://127.0.0.1:{self.edge}"
        env = dict(
            os.environ,
            NUA_MODEL="scripted:demo",
            NUA_DEMO_STEP_DELAY=config.step_delay,
            PYTHONUNBUFFERED="1",
        )
        base = [sys.executable, "-m", "opennua.cli", "serve", "--db", db, "--data", str(self.data)]
        base += ["--lease-ttl", str(config.lease_ttl)]
        self.host_ports = [free_port(), free_port()]
        edge = ["--allowed-host", f"127.0.0.1:{self.edge}"]
        self.hosts = [
            Proc(f"host{i}", [*base, "--role", "host", "--port", str(port), *edge], env, self.logs)
            for i, port in enumerate(self.host_ports)
        ]
        self.supervisors = [
            Proc(
                f"sup{i}",
                [*base, "--role", "supervisor", "--sandbox", "none", "--port", str(free_port())],
                env,
                self.logs,
            )
            for i in range(3)
        ]
        prefix = work / "nginx"
        conf = write_nginx_conf(prefix, self.host_ports, self.edge)
        self.nginx = Proc(
            "nginx", [nginx_binary(), "-p", str(prefix), "-c", str(conf), "-g", "daemon off;"],
            env, self.logs,
        )  # fmt: skip
        self.unexpected_exits: Counter[str] = Counter()
        self.exit_logs: list[str] = []
        self.lock = threading.Lock()

    def start(self) -> None:
        # The first host creates the schema and the owner token; the others then.
        self.hosts[0].start()
        wait_for(lambda: _healthy(f"http://127.0.0.1:{self.host_ports[0]}"), 120, "host0")
        for proc in [*self.hosts[1:], *self.supervisors, self.nginx]:
            proc.start()
        self.wait_ready()

    def wait_ready(self) -> None:
        for i, port in enumerate(self.host_ports):
            wait_for(lambda port=port: _healthy(f"http://127.0.0.1:{port}"), 120, f"host{i}")
        for sup in self.supervisors:
            wait_for(sup.announced, 120, sup.name)
        wait_for(lambda: _healthy(self.url), 60, "nginx")

    @property
    def token(self) -> str:
        return (self.data / "token").read_text().strip()

    def all(self) -> list[Proc]:
        return [*self.hosts, *self.supervisors, self.nginx]

    def watchdog(self) -> None:
        """Restart a process that exited without being told to (not one we just killed:
        the schedule restarts those itself)."""
        with self.lock:
            for proc in self.all():
                if proc.proc is not None and not proc.alive():
                    self.unexpected_exits[proc.name] += 1
                    tail = proc.log.read_text(errors="replace")[-2000:]
                    self.exit_logs.append(
                        f"--- {proc.log.name} (rc {proc.proc.returncode})\n{tail}"
                    )
                    proc.start()

    def heal(self) -> None:
        """Everything running and resumed, the database up."""
        with self.lock:
            if not self.cluster.ready():
                self.cluster.start()
            for proc in self.all():
                proc.resume()
        self.watchdog()
        self.wait_ready()

    def stop(self) -> None:
        for proc in reversed(self.all()):
            proc.terminate()


class Schedule:
    """The seeded faults, one at a time, each undone before the next."""

    KINDS = (
        ("supervisor_kill9", 3),
        ("supervisor_sigstop", 2),
        ("host_kill9", 2),
        ("host_sigstop", 1),
        ("postgres_kill9", 1),
    )

    def __init__(self, deployment: Deployment, config: Config) -> None:
        self.d = deployment
        self.config = config
        self.rng = random.Random(config.seed)
        self.faults: list[Fault] = []
        # Every kind once first (in a seeded order), so even a short run has each; then
        # drawn by weight.
        self.first = [k for k, _ in self.KINDS]
        self.rng.shuffle(self.first)

    def run(self, until: float, halt: threading.Event) -> None:
        kinds = [k for k, _ in self.KINDS]
        weights = [w for _, w in self.KINDS]
        while not halt.is_set():
            next_at = time.monotonic() + self.rng.uniform(*self.config.fault_gap)
            while time.monotonic() < next_at and not halt.is_set():
                self.d.watchdog()
                halt.wait(min(1.0, max(0.0, next_at - time.monotonic())))
            if halt.is_set() or time.time() >= until:
                return
            kind = self.first.pop() if self.first else self.rng.choices(kinds, weights)[0]
            self.inject(kind)

    def inject(self, kind: str) -> None:
        rng, ttl, d = self.rng, self.config.lease_ttl, self.d
        if kind.startswith("supervisor"):
            proc = rng.choice(d.supervisors)
        elif kind.startswith("host"):
            proc = rng.choice(d.hosts)
        else:
            proc = None
        fault = Fault(kind, proc.name if proc else "postmaster", time.time())
        if proc is not None and proc in d.supervisors:
            fault.supervisor_id = proc.announced()
        with d.lock:
            if kind.endswith("kill9") and proc is not None:
                proc.kill9()
            elif kind.endswith("sigstop") and proc is not None:
                proc.pause()
            else:
                d.cluster.kill9()
        self.faults.append(fault)
        if kind == "supervisor_sigstop":
            time.sleep(rng.uniform(1.5, 3.0) * ttl)  # past its lease: it must be fenced
        elif kind == "host_sigstop":
            time.sleep(rng.uniform(2.0, 6.0))
        else:
            time.sleep(rng.uniform(0.5, 2.0))
        with d.lock:
            if proc is None:
                d.cluster.start()
            elif kind.endswith("sigstop"):
                proc.resume()
            else:
                proc.start()
        fault.until = time.time()


# -- the clients -------------------------------------------------------------------------


@dataclass
class BotAnswer:
    client_id: str
    option_id: str
    status: int | None = None
    resolution: dict[str, Any] | None = None
    gave_up: str | None = None


@dataclass
class SessionRun:
    index: int
    session_id: str | None = None
    started_at: float = 0.0
    ended_at: float | None = None
    state: Any = field(default_factory=initial_state)
    answers: dict[str, list[BotAnswer]] = field(default_factory=dict)
    stuck: str | None = None


class Clients:
    def __init__(self, url: str, token: str, config: Config, halt_new: asyncio.Event) -> None:
        self.url = url
        self.token = token
        self.config = config
        self.halt_new = halt_new
        self.rng = random.Random(config.seed + 1)
        self.runs: list[SessionRun] = []
        self.retransmissions = 0
        self.stuck_in_flight = 0

    async def post(
        self, http: httpx.AsyncClient, path: str, body: dict[str, Any], key: str
    ) -> httpx.Response | str:
        """POST with an Idempotency-Key, retransmitted (same key, same body) across
        connection errors, 5xx from the proxy and `request_in_flight`; a string on
        giving up: `STUCK` when the key stayed in flight for `IN_FLIGHT_PATIENCE` s."""
        deadline = time.monotonic() + 300
        in_flight_since: float | None = None
        while True:
            try:
                response = await http.post(path, json=body, headers={"Idempotency-Key": key})
                in_flight = response.status_code == 409 and (
                    response.json().get("code") == "request_in_flight"
                )
                if response.status_code not in RETRYABLE and not in_flight:
                    return response
                if in_flight:
                    in_flight_since = in_flight_since or time.monotonic()
                    if time.monotonic() - in_flight_since > IN_FLIGHT_PATIENCE:
                        self.stuck_in_flight += 1
                        return STUCK
                reason = f"{response.status_code} {response.text[:120]}"
            except httpx.HTTPError as exc:
                reason = f"{type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                return reason
            self.retransmissions += 1
            await asyncio.sleep(0.5 + self.rng.random())

    async def post_anew(
        self, http: httpx.AsyncClient, path: str, body: dict[str, Any], key: str
    ) -> httpx.Response | str:
        """`post`, and once more under a new key if the first is stuck in flight: the
        user's new decision to send again (no Host is paused for minutes here, so the
        first copy was never accepted)."""
        got = await self.post(http, path, body, key)
        if got == STUCK:
            got = await self.post(http, path, body, key + "-again")
        return got

    async def get(self, http: httpx.AsyncClient, path: str, **params: Any) -> Any:
        while True:
            try:
                response = await http.get(path, params=params)
                if response.status_code == 200:
                    return response.json()
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.5 + self.rng.random())

    async def worker(self, http: httpx.AsyncClient, index: int) -> None:
        n = 0
        while not self.halt_new.is_set():
            run = SessionRun(index=len(self.runs), started_at=time.time())
            self.runs.append(run)
            await self.one_session(http, run, f"c{index}-{n}")
            n += 1

    async def one_session(self, http: httpx.AsyncClient, run: SessionRun, tag: str) -> None:
        cid = f"cli_{tag}"
        created = await self.post_anew(
            http, "/v1/sessions", {"title": tag, "client_id": cid}, f"create-{tag}"
        )
        if isinstance(created, str) or created.status_code != 201:
            run.stuck = f"create: {created if isinstance(created, str) else created.text}"
            return
        sid = run.session_id = created.json()["session_id"]
        body = {"client_id": cid, "content": [{"type": "text", "text": TASK}]}
        sent = await self.post_anew(http, f"/v1/sessions/{sid}/messages", body, f"message-{tag}")
        if isinstance(sent, str) or sent.status_code != 202:
            run.stuck = f"message: {sent if isinstance(sent, str) else sent.text}"
            return
        bots: dict[str, asyncio.Task[None]] = {}
        rounds: Counter[str] = Counter()
        while True:
            page = await self.get(
                http, f"/v1/sessions/{sid}/actions", after=run.state["seq"], limit=1000
            )
            for raw in page["actions"]:
                run.state = reduce(run.state, action_from_dict(raw))
            for request in run.state["open_input_requests"]:
                rid = request["request_id"] if isinstance(request, dict) else request
                task = bots.get(rid)
                if task is None or task.done():
                    # A new request, or every bot on it gave up (a key stuck in flight):
                    # two fresh bots race again.
                    rounds[rid] += 1
                    bots[rid] = asyncio.create_task(self.race(http, run, rid, rounds[rid]))
            turns = run.state["turns"]
            if turns and turns[-1]["state"] == "ended":
                run.ended_at = time.time()
                break
            await asyncio.sleep(self.config.poll * (0.5 + self.rng.random()))
        for task in bots.values():
            await task

    async def race(self, http: httpx.AsyncClient, run: SessionRun, rid: str, round_: int) -> None:
        assert run.session_id is not None
        request = _find_request(run.state, rid)
        confirmation = request is not None and request.get("reason") == "confirmation"
        yes, no = ("retry", "skip") if confirmation else ("allow_once", "reject_once")
        bots = []
        for name in ("a", "b"):
            option = yes if self.rng.random() < self.config.approve else no
            answer = BotAnswer(f"cli_bot{name}{round_}-{run.index}", option)
            run.answers.setdefault(rid, []).append(answer)
            bots.append(self.bot(http, run.session_id, rid, answer))
        await asyncio.gather(*bots)

    async def bot(self, http: httpx.AsyncClient, sid: str, rid: str, answer: BotAnswer) -> None:
        await asyncio.sleep(self.rng.random() * 0.3)
        body = {"client_id": answer.client_id, "option_id": answer.option_id}
        got = await self.post(
            http,
            f"/v1/sessions/{sid}/input-requests/{rid}/answer",
            body,
            f"{rid}-{answer.client_id}",
        )
        if isinstance(got, str):
            answer.gave_up = got
            return
        answer.status = got.status_code
        with contextlib.suppress(ValueError):
            answer.resolution = got.json().get("resolution")

    async def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        limits = httpx.Limits(max_connections=4 * self.config.sessions + 10)
        async with httpx.AsyncClient(
            base_url=self.url, headers=headers, timeout=30, limits=limits
        ) as http:
            await asyncio.gather(*(self.worker(http, i) for i in range(self.config.sessions)))


def _find_request(state: Any, rid: str) -> dict[str, Any] | None:
    for turn in state["turns"]:
        found = turn["input_requests"].get(rid)
        if found is not None:
            return dict(found)
    return None


# -- the run and its checks ----------------------------------------------------------------


@dataclass
class Report:
    config: Config
    window: float
    runs: list[SessionRun]
    faults: list[Fault]
    failovers: list[float]
    unexpected_exits: Counter[str]
    exit_logs: list[str]
    problems: list[str]
    completed: int
    resumable: int
    completed_in_window: int
    stop_reasons: Counter[str]
    errors: Counter[str]
    shell_runs: int
    retransmissions: int
    stuck_in_flight: int
    races: int
    #: Wall seconds of each phase: start, window (faults, then healing), settle, check.
    phases: dict[str, float] = field(default_factory=dict)

    def fault_counts(self) -> Counter[str]:
        return Counter(f.kind for f in self.faults)


def _ts(action: dict[str, Any]) -> float:
    return datetime.fromisoformat(action["ts"].replace("Z", "+00:00")).timestamp()


def history(url: str, token: str, sid: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
        actions: list[dict[str, Any]] = []
        while True:
            page = c.get(
                f"/v1/sessions/{sid}/actions", params={"after": len(actions), "limit": 1000}
            )
            page.raise_for_status()
            got = page.json()["actions"]
            if not got:
                return actions
            actions.extend(got)


def check(
    deployment: Deployment,
    clients: Clients,
    faults: list[Fault],
    config: Config,
    window: float,
    t0: float,
) -> Report:
    url, token = deployment.url, deployment.token
    problems: list[str] = []
    completed = resumable = in_window = shell_runs = races = 0
    stop_reasons: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    #: Sessions whose whole log is kept for a post-mortem (a violation or a failed turn).
    evidence: set[str] = set()
    logs: dict[str, list[dict[str, Any]]] = {}
    http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    for run in clients.runs:
        sid = run.session_id
        if sid is None:
            problems.append(f"run {run.index}: never created ({run.stuck})")
            continue
        log = logs[sid] = history(url, token, sid)
        label = f"{sid}"
        count_before = len(problems)
        # Gapless, unique.
        if [a["seq"] for a in log] != list(range(1, len(log) + 1)):
            problems.append(f"{label}: seqs not gapless")
        if len({a["id"] for a in log}) != len(log):
            problems.append(f"{label}: an action id appears twice")
        replayed = replay(action_from_dict(a) for a in log)
        if replayed["anomalies"]:
            problems.append(f"{label}: anomalies {replayed['anomalies'][:2]}")
        # Converged: the client's incrementally folded state, the replay, the snapshot.
        snapshot = http.get(f"/v1/sessions/{sid}").json()
        # The client folded the pages it polled; it stopped at its turn's end (or when the
        # run ended), so it must equal the replay of the log up to where it stopped.
        upto = replay(action_from_dict(a) for a in log[: run.state["seq"]])
        if state_to_json(run.state) != state_to_json(upto):
            problems.append(f"{label}: the client's state differs from the replay")
        # The Host's snapshot: of the same log (a resumable session may still be moving).
        if snapshot["seq"] == replayed["seq"]:
            if state_to_json(snapshot["state"]) != state_to_json(replayed):
                problems.append(f"{label}: the Host's snapshot differs from the replay")
        elif run.ended_at is not None:
            problems.append(f"{label}: snapshot at seq {snapshot['seq']}, log at {replayed['seq']}")
        # Completed or resumable.
        turns = replayed["turns"]
        if turns and turns[-1]["state"] == "ended":
            completed += 1
            stop_reasons[turns[-1]["stop_reason"]] += 1
            if turns[-1]["error"]:
                errors[turns[-1]["error"]["code"]] += 1
                evidence.add(sid)
            if run.ended_at is not None and run.ended_at <= t0 + window:
                in_window += 1
        elif turns:
            execution = http.get(f"/v1/executions/{turns[-1]['execution_id']}").json()
            if execution.get("status") in ("queued", "running", "waiting_input"):
                resumable += 1
            else:
                problems.append(f"{label}: neither completed nor resumable: {execution}")
        else:
            problems.append(f"{label}: no turn started ({run.stuck})")
        # One resolution per request; the one winner told so; every loser told the winner.
        resolved: dict[str, list[dict[str, Any]]] = {}
        for a in log:
            if a["type"] == "input_request.resolved":
                resolved.setdefault(a["data"]["request_id"], []).append(a["data"])
        for rid, got in resolved.items():
            if len(got) != 1:
                problems.append(f"{label}: {rid} resolved {len(got)} times")
        for rid, answers in run.answers.items():
            races += 1
            final = resolved.get(rid, [None])[0]
            winners = {a.client_id for a in answers if a.status == 200}
            if final is None:
                if winners:
                    problems.append(f"{label}: {rid}: {winners} won but the log has no resolution")
                continue
            by = final["answered_by"]["client_id"]
            if winners - {by}:
                problems.append(f"{label}: {rid}: told {winners} they won, the log says {by}")
            for a in answers:
                if (
                    a.status == 409
                    and (a.resolution or {}).get("answered_by", {}).get("client_id") != by
                ):
                    problems.append(
                        f"{label}: {rid}: loser {a.client_id} told {a.resolution}, not {by}"
                    )
                if a.status not in (200, 409, None):
                    problems.append(f"{label}: {rid}: {a.client_id} got {a.status}")
        # Each approved command ran once: one line in the side-effect file per completed
        # run, and every run that an attempt's crash rolled back was reported as lost.
        lines = 0
        side = deployment.data / "workspaces" / sid / SIDE_EFFECT
        if side.exists():
            lines = side.read_text().count(" lines")
        shell = [c for t in turns for c in t["tool_calls"].values() if c["name"] == "shell"]
        done = sum(1 for c in shell if c["status"] == "completed")
        shell_runs += lines
        if lines != done:
            problems.append(f"{label}: {SIDE_EFFECT} has {lines} runs, the log {done} completed")
        approvals = sum(
            1
            for d in (v[0] for v in resolved.values())
            if d.get("option_id") in ("allow_once", "retry")
        )
        lost = sum(
            1
            for a in log
            if a["type"] == "workspace.restored" and SIDE_EFFECT in a["data"]["lost_paths"]
        )
        if lines + lost > approvals:
            problems.append(
                f"{label}: {lines} kept + {lost} rolled-back runs > {approvals} approvals"
            )
        if len(problems) > count_before:
            evidence.add(sid)
    http.close()
    keep = deployment.work / "evidence"
    keep.mkdir(exist_ok=True)
    for sid in evidence:
        (keep / f"{sid}.json").write_text(json.dumps(logs[sid], indent=1))
    return Report(
        config=config,
        window=window,
        runs=clients.runs,
        faults=faults,
        failovers=failovers(faults, logs),
        unexpected_exits=deployment.unexpected_exits,
        exit_logs=deployment.exit_logs,
        problems=problems,
        completed=completed,
        resumable=resumable,
        completed_in_window=in_window,
        stop_reasons=stop_reasons,
        errors=errors,
        shell_runs=shell_runs,
        retransmissions=clients.retransmissions,
        stuck_in_flight=clients.stuck_in_flight,
        races=races,
    )


def failovers(faults: list[Fault], logs: dict[str, list[dict[str, Any]]]) -> list[float]:
    """Per execution a killed or paused supervisor was running: seconds from the fault to
    the next attempt's `execution.attempt_started` (stamped by the new owner's clock)."""
    out: list[float] = []
    for fault in faults:
        if not fault.kind.startswith("supervisor") or fault.supervisor_id is None:
            continue
        for log in logs.values():
            owner: str | None = None
            for action in log:
                at = _ts(action)
                if at < fault.at:
                    if action["type"] == "execution.attempt_started":
                        owner = action["data"]["supervisor_id"]
                    elif action["type"] in ("input_request.opened", "turn.ended"):
                        owner = None  # parked or done: no lease to take over
                    continue
                if owner != fault.supervisor_id:
                    break
                if action["type"] == "execution.attempt_started":
                    out.append(at - fault.at)
                    break
    return out


@contextlib.contextmanager
def deployed(cluster: PgCluster, work: Path, config: Config) -> Iterator[Deployment]:
    db = cluster.create_db("nua_chaos")
    deployment = Deployment(cluster, db, work, config)
    try:
        deployment.start()
        yield deployment
    finally:
        deployment.stop()


def run_chaos(cluster: PgCluster, work: Path, config: Config) -> Report:
    began = time.monotonic()
    with deployed(cluster, work, config) as deployment:
        schedule = Schedule(deployment, config)
        phases = {"start": time.monotonic() - began}
        t0 = time.time()
        until = t0 + config.seconds
        halt = threading.Event()
        chaos = threading.Thread(target=schedule.run, args=(until, halt), daemon=True)

        async def drive() -> Clients:
            halt_new = asyncio.Event()
            clients = Clients(deployment.url, deployment.token, config, halt_new)
            running = asyncio.create_task(clients.run())
            await asyncio.sleep(config.seconds)
            halt_new.set()  # no new sessions; the running ones finish
            halt.set()
            await asyncio.to_thread(chaos.join)
            await asyncio.to_thread(deployment.heal)
            phases["window"] = time.time() - t0
            settling = time.monotonic()
            try:
                await asyncio.wait_for(asyncio.shield(running), config.settle)
            except TimeoutError:
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running
            phases["settle"] = time.monotonic() - settling
            return clients

        chaos.start()
        clients = asyncio.run(drive())
        deployment.heal()
        checking = time.monotonic()
        report = check(deployment, clients, schedule.faults, config, config.seconds, t0)
        phases["check"] = time.monotonic() - checking
        report.phases = phases
        return report
