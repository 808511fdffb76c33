"""A simulated deployment, all of it drawn from one seed.

Two Host processes and two or three Supervisor processes share one in-memory store (as
`--role host` / `--role supervisor` processes share PostgreSQL); driver clients send
messages, bot clients race to answer input requests, watcher clients follow sessions
through a Host's Hub and fold what they get. Every process is a set of asyncio tasks
tagged with its name, with its own connection to the store, so a crash cancels exactly
its tasks at whatever await point they were at and severs its connection (nothing it
would still do reaches the store), and a pause (SIGSTOP) freezes it at its next store
call. Faults, drawn from the seed during the fault window:

- crash and restart of a Host or a Supervisor process,
- a Supervisor paused past its lease,
- a commit whose outcome the caller never learns (it committed; the caller gets
  `CommitUnknown`), at any unit,
- duplicated intents (retransmissions with the same intent_id, also after a crash) and
  reordered ones (bots answering in random order, late retransmissions),
- a watcher that stalls past its queue bound (it gets `resync`),
- a deadline that expires while the turn waits for an answer,
- a revoked grant: an execution's grant revoked while it is queued, runs or waits (as
  revoking its token or its principal's membership does), with Hosts and Supervisors
  checking grants as `nua serve` wires them.

Then the world quiesces (faults stop, dead processes restart) and `invariants.check`
reads the log and the store. `World.fired` counts each fault that actually happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import random
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from opennua.auth import GRANT_TTL, Authority
from opennua.host import Actor, Hub, SessionHost
from opennua.protocol import (
    Accepted,
    AnswerInput,
    CreateSession,
    IntentResult,
    Rejected,
    SendMessage,
    action_from_json,
    initial_state,
    new_id,
    reduce,
    state_from_json,
)
from opennua.protocol.actions import TextPart
from opennua.protocol.ids import IdKind
from opennua.runtime import AgentDefinition, Sandbox, ToolContext, default_agent, tool
from opennua.runtime.testing import ScriptCall, ScriptedModel, ScriptStep
from opennua.store import (
    GrantRecord,
    MembershipRecord,
    PrincipalRecord,
    Store,
    StoreError,
    Unavailable,
    WorkspaceRecord,
    open_store,
)
from opennua.store._executions import Claim
from opennua.store._memory import MemoryStore
from opennua.store._sql import Program
from opennua.store._unit import Unit
from opennua.store._watch import Watcher
from opennua.supervisor import Supervisor

T = TypeVar("T")
EPOCH = 1_800_000_000.0
#: How long after the fault window a client keeps retransmitting an intent in flight.
GIVE_UP = 120.0
PROCESS: contextvars.ContextVar[str] = contextvars.ContextVar("sim_process", default="world")
FAULTS = (
    "host_crash",
    "supervisor_crash",
    "supervisor_paused",
    "commit_unknown",
    "duplicate_intent",
    "reordered_answers",
    "stalled_subscriber",
    "deadline_expired",
    "revoked_grant",
)
#: The one workspace and owner every client acts as (set up before faults start).
WORKSPACE, OWNER = "wsp_sim", "prn_sim"


@dataclass
class Config:
    """The shape of one world, drawn from its seed."""

    sessions: int
    supervisors: int
    ttl: float
    deadline: float
    fault_window: float
    crash_rate: float  # process crashes per virtual second, all processes together
    pause_rate: float
    unknown_rate: float  # share of units whose outcome is lost
    duplicate_rate: float
    stall_rate: float
    revoke_rate: float  # grant revocations per virtual second

    @staticmethod
    def draw(rng: random.Random) -> Config:
        return Config(
            sessions=rng.randint(1, 2),
            supervisors=rng.randint(2, 3),
            ttl=6.0,
            deadline=rng.choice([3600.0, 3600.0, 3600.0, 40.0]),
            fault_window=rng.uniform(15.0, 40.0),
            crash_rate=rng.choice([0.0, 0.05, 0.1]),
            pause_rate=rng.choice([0.0, 0.03]),
            unknown_rate=rng.choice([0.0, 0.0, 0.02, 0.05]),
            duplicate_rate=rng.choice([0.1, 0.3]),
            stall_rate=rng.choice([0.0, 0.5]),
            revoke_rate=rng.choice([0.0, 0.0, 0.1]),
        )


class Connection(Store):
    """One process's connection to the shared store: severed when it crashes, frozen at
    the next call while it is paused."""

    def __init__(self, db: MemoryStore, process: Process) -> None:
        super().__init__(db.blobs)
        self._db = db
        self._process = process

    async def _gate(self) -> None:
        process = self._process
        while process.paused_until > asyncio.get_running_loop().time():
            await asyncio.sleep(process.paused_until - asyncio.get_running_loop().time())
        if process.dead:
            raise Unavailable(f"{process.name} is dead")

    async def _commit(self, unit: Unit) -> list[Any]:
        await self._gate()
        if len(unit.ops) == 1 and isinstance(unit.ops[0], Claim) and not unit.ops[0].attempt_id:
            # The store would draw the attempt id's entropy itself: draw it from the seed.
            claim = dataclasses.replace(unit.ops[0], attempt_id=self._process.ids("attempt"))
            unit = Unit(unit.fence, (claim,))
        return await self._db._commit(unit)

    async def _read(self, program: Program[T]) -> T:
        await self._gate()
        return await self._db._read(program)

    def watch(self) -> Watcher:
        return self._db.watch()

    async def check_writable(self) -> None:
        await self._gate()

    async def close(self) -> None:
        return None


@dataclass(eq=False)
class Process:
    name: str
    ids: Callable[[IdKind], str]
    dead: bool = False
    paused_until: float = 0.0
    context: contextvars.Context = field(default_factory=contextvars.Context)

    def __post_init__(self) -> None:
        self.context.run(PROCESS.set, self.name)

    def spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """A task of this process (and so are the tasks it creates)."""
        return asyncio.get_running_loop().create_task(coro, context=self.context)

    def kill(self) -> None:
        self.dead = True
        for task in list(_TASKS.get(self.name, ())):
            task.cancel()


#: Every live task by the process that created it (tasks inherit their creator's
#: context), in creation order: a kill cancels them in that order. (A WeakSet's order is
#: the tasks' addresses, which differ between processes: a seed replayed in another
#: process took another path.)
_TASKS: dict[str, dict[asyncio.Task[Any], None]] = {}


def _task_factory(
    loop: asyncio.AbstractEventLoop, coro: Any, *, context: contextvars.Context | None = None
) -> asyncio.Task[Any]:
    context = context if context is not None else contextvars.copy_context()
    task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, context=context)
    tasks = _TASKS.setdefault(context.get(PROCESS), {})
    tasks[task] = None
    task.add_done_callback(lambda done: tasks.pop(done, None))
    return task


@dataclass
class HostProcess:
    process: Process
    host: SessionHost
    hub: Hub


@dataclass
class SupervisorProcess:
    process: Process
    supervisor: Supervisor


@dataclass
class Outcome:
    """What a client was told for one intent (its last delivery's answer)."""

    intent: Any
    session_id: str
    result: IntentResult


class World:
    def __init__(self, seed: int, data_dir: Path) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.config = Config.draw(self.rng)
        self.data_dir = data_dir
        self.fired: Counter[str] = Counter()
        self.effects: Counter[str] = Counter()  # tool_call_id -> times the side effect ran
        self.charges_begun: dict[str, list[float]] = {}  # tool_call_id -> when each began
        self.outcomes: list[Outcome] = []
        self.watchers: dict[str, Any] = {}  # name -> final (seq, state)
        self.fence_violations: list[str] = []
        #: Exceptions that ended a client task: each is a failure of the run.
        self.errors: list[str] = []
        self.sessions: list[str] = []
        self.hosts: list[HostProcess] = []
        self.supervisors: list[SupervisorProcess] = []
        self._incarnation = Counter[str]()
        self._faulting = True
        self._clients: list[asyncio.Task[None]] = []
        self._ids = 0
        self.agent, self.model = self._agent()

    # -- the agent: a plan, a side-effecting call needing approval, an answer ----------

    def _agent(self) -> tuple[AgentDefinition, ScriptedModel]:
        world = self

        @tool("charge", kind="execute", title="Charge the card", requires_approval=True)
        async def charge(ctx: ToolContext, amount: int) -> str:
            """Charge `amount`: the side effect that must happen at most once."""
            world.effects[ctx.tool_call_id] += 1
            world.charges_begun.setdefault(ctx.tool_call_id, []).append(world.now())
            await asyncio.sleep(world.rng.uniform(0, 2))  # a crash may land mid-call
            return f"charged {amount}"

        plan = next(t for t in default_agent("scripted:demo").tools if t.name == "plan")
        script = [
            ScriptStep(
                calls=[
                    ScriptCall("plan", {"entries": [{"content": "charge", "status": "pending"}]})
                ]
            ),
            ScriptStep(calls=[ScriptCall("charge", {"amount": 42})]),
            ScriptStep(text="Charged the card, all done."),
        ]
        agent = AgentDefinition(
            name="sim", instructions="Charge once.", model="scripted:sim", tools=(plan, charge)
        )
        return agent, ScriptedModel(script)

    # -- the store and its faults -----------------------------------------------------

    def _fault(self, unit: Unit) -> Any:
        if self._faulting and self.rng.random() < self.config.unknown_rate:
            self.fired["commit_unknown"] += 1
            return "unknown"
        return None

    def _observe(self, unit: Unit, results: list[Any]) -> None:
        # No write accepted from a fenced epoch: right after its COMMIT, a fenced unit's
        # epoch must still be the execution's.
        if unit.fence is None:
            return
        execution_id, epoch, _ = unit.fence
        rows = self.db.read_now(_epoch_of(execution_id))
        if rows != epoch:
            self.fence_violations.append(f"{execution_id}: epoch {epoch} wrote at {rows}")

    def now(self) -> float:
        return EPOCH + asyncio.get_running_loop().time()

    def ids(self, kind: IdKind) -> str:
        self._ids += 1
        return new_id(kind, ms=int(self.now() * 1000), entropy=self.rng.randbytes(10))

    # -- processes --------------------------------------------------------------------

    def _process(self, role: str) -> Process:
        self._incarnation[role] += 1
        return Process(f"{role}#{self._incarnation[role]}", self.ids)

    def start_host(self, slot: int) -> HostProcess:
        process = self._process(f"host{slot}")
        conn = Connection(self.db, process)
        hub = Hub(conn, max_actions=16, coalesce_seconds=0.01)
        host = SessionHost(
            conn,
            hub,
            clock=self.now,
            ids=self.ids,
            deadline_seconds=self.config.deadline,
            grant_check=Authority(conn, clock=self.now).grant_problem,
        )
        process.spawn(hub.follow(conn.watch()))
        entry = HostProcess(process, host, hub)
        if slot < len(self.hosts):
            self.hosts[slot] = entry
        else:
            self.hosts.append(entry)
        return entry

    def start_supervisor(self, slot: int) -> SupervisorProcess:
        process = self._process(f"sup{slot}")
        conn = Connection(self.db, process)
        supervisor = Supervisor(
            conn,
            self.agent,
            supervisor_id=f"sup_{slot}",
            data_dir=self.data_dir,
            ttl=self.config.ttl,
            poll_interval=0.5,
            clock=self.now,
            monotonic=asyncio.get_running_loop().time,
            model=self.model,
            sandbox=Sandbox("none"),
            grant_check=Authority(conn, clock=self.now).renew_grant,
        )
        process.spawn(supervisor.run())
        entry = SupervisorProcess(process, supervisor)
        if slot < len(self.supervisors):
            self.supervisors[slot] = entry
        else:
            self.supervisors.append(entry)
        return entry

    async def _chaos(self) -> None:
        """Crash, restart and pause processes until the fault window closes."""
        c, loop = self.config, asyncio.get_running_loop()
        rate = c.crash_rate + c.pause_rate
        while rate > 0:
            await asyncio.sleep(self.rng.expovariate(rate))
            if loop.time() >= c.fault_window:
                return
            if self.rng.random() < c.pause_rate / rate:
                victim = self.rng.choice(self.supervisors)
                victim.process.paused_until = loop.time() + c.ttl * self.rng.uniform(1.5, 3)
                self.fired["supervisor_paused"] += 1
                continue
            if self.rng.random() < 0.5:
                slot = self.rng.randrange(len(self.hosts))
                self.hosts[slot].process.kill()
                self.fired["host_crash"] += 1
                await asyncio.sleep(self.rng.uniform(0, 3))
                self.start_host(slot)
            else:
                slot = self.rng.randrange(len(self.supervisors))
                self.supervisors[slot].process.kill()
                self.fired["supervisor_crash"] += 1
                await asyncio.sleep(self.rng.uniform(0, 3))
                self.start_supervisor(slot)

    async def _revoker(self) -> None:
        """Revoke the grant of a random live execution now and then until the fault
        window closes (an administrator elsewhere; its commit may be lost too)."""
        c, loop = self.config, asyncio.get_running_loop()
        while c.revoke_rate > 0:
            await asyncio.sleep(self.rng.expovariate(c.revoke_rate))
            if loop.time() >= c.fault_window:
                return
            live = [
                e.execution_id
                for session_id in list(self.sessions)
                for e in await self.db.list_executions(session_id)
                if e.status in ("queued", "running", "waiting_input")
            ]
            if not live:
                continue
            execution_id = self.rng.choice(live)
            with contextlib.suppress(StoreError):  # an outcome lost: the grant says
                await self.db.revoke_grant(execution_id, self.now(), "token_revoked")
            grant = await self.db.get_grant(execution_id)
            if grant is not None and grant.revoked_at is not None:
                self.fired["revoked_grant"] += 1

    # -- clients ----------------------------------------------------------------------

    async def deliver(self, session_id: str, intent: Any) -> IntentResult:
        """Send an intent through a random Host until one answers (same intent_id every
        time: a retransmission), as a client whose connection broke would."""
        while True:
            host = self.rng.choice(self.hosts)
            task = host.process.spawn(self._call(host.host, session_id, intent))
            try:
                result = await asyncio.shield(task)
            except (asyncio.CancelledError, StoreError):
                if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise
                await asyncio.sleep(self.rng.uniform(0.1, 2))
                continue
            if isinstance(result, Rejected) and result.code == "request_in_flight":
                if asyncio.get_running_loop().time() > self.config.fault_window + GIVE_UP:
                    # A crashed host left the key in flight: it stays so until the key's
                    # TTL (a day). A known gap (docs/reliability.md); the client gives up.
                    self.fired["stuck_in_flight"] += 1
                    return result
                await asyncio.sleep(self.rng.uniform(0.5, 2))
                continue
            if self.rng.random() < self.config.duplicate_rate:
                # A retransmission after the answer was lost: it must replay, not redo.
                self.fired["duplicate_intent"] += 1
                await asyncio.sleep(self.rng.uniform(0, 5))
                again = await self.deliver_once(session_id, intent)
                if again is not None and again != result:
                    self.outcomes.append(Outcome(intent, session_id, again))
            return result

    async def deliver_once(self, session_id: str, intent: Any) -> IntentResult | None:
        host = self.rng.choice(self.hosts)
        task = host.process.spawn(self._call(host.host, session_id, intent))
        try:
            return await asyncio.shield(task)
        except (asyncio.CancelledError, StoreError):
            if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise
            return None

    async def _call(self, host: SessionHost, session_id: str, intent: Any) -> IntentResult:
        # Every client is the workspace's owner, as `nua serve` authenticates them; a turn
        # it starts runs under a grant the revoker may take away.
        grant = GrantRecord(
            execution_id="",
            principal_id=OWNER,
            workspace_id=WORKSPACE,
            expires_at=self.now() + GRANT_TTL,
        )
        actor = Actor(OWNER, WORKSPACE, grant)
        target = None if isinstance(intent, CreateSession) else session_id
        return await host.submit(target, intent, actor=actor)

    async def driver(self, n: int) -> None:
        create = CreateSession(intent_id=f"int_create_{n}", client_id=f"cli_d{n}", title="sim")
        created = await self.deliver("", create)
        if not isinstance(created, Accepted):
            return  # its key stuck in flight (see deliver): this client gave up
        session_id = created.ids["session_id"]
        self.sessions.append(session_id)
        self.outcomes.append(Outcome(create, session_id, created))
        for bot in range(2):
            self._client(self.bot(session_id, f"cli_b{n}_{bot}"))
        self._client(self.watcher(session_id, f"cli_w{n}"))
        for m in range(self.rng.choice([1, 1, 2])):
            if_busy = self.rng.choice(["enqueue", "enqueue", "reject"])
            message = SendMessage(
                intent_id=f"int_msg_{n}_{m}",
                client_id=f"cli_d{n}",
                content=[TextPart(text="Charge the card")],
                if_busy=if_busy,  # type: ignore[arg-type]
            )
            result = await self.deliver(session_id, message)
            self.outcomes.append(Outcome(message, session_id, result))
            await asyncio.sleep(self.rng.uniform(0, 10))

    def _client(self, coro: Coroutine[Any, Any, None]) -> None:
        async def guarded() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                self.errors.append(f"client task failed: {exc!r}")

        self._clients.append(asyncio.create_task(guarded()))

    async def bot(self, session_id: str, client_id: str) -> None:
        """Answer every open input request of the session, racing the other bot."""
        answered: set[str] = set()
        while True:
            await asyncio.sleep(self.rng.uniform(0.2, 2))
            if self.config.deadline < 3600 and self.rng.random() < 0.3:
                await asyncio.sleep(self.config.deadline)  # too late on purpose
            try:
                _, state = await self.rng.choice(self.hosts).host.snapshot(session_id)
            except StoreError:
                continue
            for entry in state["open_input_requests"]:
                request_id = entry["request_id"]
                if request_id in answered:
                    continue
                answered.add(request_id)
                if self.rng.random() < 0.5:
                    # A person reads the prompt before answering: the other bot may answer
                    # meanwhile, so this answer races one already given (or loses to it).
                    await asyncio.sleep(self.rng.uniform(0, 1.5))
                turn = next(t for t in state["turns"] if t["turn_id"] == entry["turn_id"])
                request = turn["input_requests"][request_id]
                options = [o["option_id"] for o in request.get("options") or []]
                allow = [o for o in options if o.startswith("allow")] or options
                choice = allow[0] if self.rng.random() < 0.8 or not options else options[-1]
                answer = AnswerInput(
                    intent_id=f"int_{client_id}_{request_id}",
                    client_id=client_id,
                    request_id=request_id,
                    option_id=choice if options else None,
                    payload=None if options else "yes",
                )
                result = await self.deliver(session_id, answer)
                self.outcomes.append(Outcome(answer, session_id, result))

    async def watcher(self, session_id: str, name: str) -> None:
        """Follow the session through a Host's Hub and fold every action; stall now and
        then past the queue bound, then resync from a snapshot as the real clients do."""
        seq, state = 0, initial_state()
        self.watchers[name] = (session_id, seq, state)
        while True:
            entry = self.rng.choice(self.hosts)
            try:
                async with entry.hub.subscribe(session_id, seq) as stream:
                    async for batch in stream.batches(heartbeat=5.0):
                        if entry.process.dead:
                            break
                        if batch and batch[-1].kind == "resync":
                            self.fired["stalled_subscriber"] += 1
                            at, text = await entry.host.snapshot_json(session_id)
                            seq, state = at, state_from_json(text)
                            self.watchers[name] = (session_id, seq, state)
                            break
                        for frame in batch:
                            state = reduce(state, action_from_json(frame.json))
                            seq = frame.seq
                        self.watchers[name] = (session_id, seq, state)
                        if entry.process.dead:
                            break  # its connection to that host dropped: reconnect
                        if self._faulting and self.rng.random() < self.config.stall_rate / 10:
                            await asyncio.sleep(self.rng.uniform(5, 20))  # not reading
            except (StoreError, asyncio.CancelledError):
                if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                    raise
                await asyncio.sleep(self.rng.uniform(0.1, 1))

    # -- the run ----------------------------------------------------------------------

    async def run(self, horizon: float = 900.0) -> None:
        _TASKS.clear()
        asyncio.get_running_loop().set_task_factory(_task_factory)  # type: ignore[arg-type]
        self.db: MemoryStore = await open_store("memory:")  # type: ignore[assignment]
        self.db.on_commit = self._observe
        try:
            for slot in range(2):
                self.start_host(slot)
            # The deployment the sessions resolve: set up before faults start (at install).
            await self.hosts[0].host.registry.ensure_builtin("scripted:demo")
            await self._owner()
            self.db.faults = self._fault
            for slot in range(self.config.supervisors):
                self.start_supervisor(slot)
            chaos = asyncio.create_task(self._chaos())
            revoker = asyncio.create_task(self._revoker())
            drivers = [asyncio.create_task(self.driver(n)) for n in range(self.config.sessions)]
            await asyncio.sleep(self.config.fault_window)
            self._faulting = False
            chaos.cancel()
            revoker.cancel()
            for slot, entry in enumerate(self.hosts):
                if entry.process.dead:
                    self.start_host(slot)
            for slot, s in enumerate(self.supervisors):
                s.process.paused_until = 0.0
                if s.process.dead:
                    self.start_supervisor(slot)
            await asyncio.gather(*drivers)
            loop = asyncio.get_running_loop()
            while loop.time() < horizon and not await self._settled():
                await asyncio.sleep(5)
            # Let watchers catch up (one may be in a stall): until each has the whole log.
            caught_up_by = loop.time() + 60
            while loop.time() < caught_up_by and not await self._caught_up():
                await asyncio.sleep(1)
        finally:
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()
            await asyncio.sleep(0)

    async def _owner(self) -> None:
        now = self.now()
        await self.db.create_workspace(
            WorkspaceRecord(workspace_id=WORKSPACE, name="sim", created_at=now)
        )
        await self.db.create_principal(
            PrincipalRecord(principal_id=OWNER, kind="user", name="owner", created_at=now),
            memberships=[
                MembershipRecord(
                    workspace_id=WORKSPACE, principal_id=OWNER, role="owner", created_at=now
                )
            ],
        )

    async def _caught_up(self) -> bool:
        for session_id, seq, _ in self.watchers.values():
            if seq < (await self.db.get_session(session_id)).last_seq:
                return False
        return True

    async def _settled(self) -> bool:
        for session_id in self.sessions:
            for execution in await self.db.list_executions(session_id):
                if execution.status in ("queued", "running", "waiting_input"):
                    return False
        return True


def _epoch_of(execution_id: str) -> Program[int | None]:
    from opennua.store._sql import Query

    rows = yield Query("SELECT epoch FROM executions WHERE execution_id = ?", (execution_id,))
    return rows[0][0] if rows else None
