"""The columns of the conformance matrix: one driver per client, all with one interface.

A scenario (a row, `_matrix.py`) is written once against `Driver`; a driver says how
*its* client starts a turn, what it shows, how it answers, reconnects and reads an
artifact. Adding a client is adding a driver here (and its name to `COLUMNS`).

What a client shows is a `View`; `Driver.expected(host_state)` projects the Host's state
into the same shape, so a cell compares like with like and the Host stays the truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from opennua.client import ActionEvent, ConflictError, SessionClient, connect
from opennua.protocol import state_to_json
from tests._support.polling import wait_for
from tests.conformance._host import DEMO, Host, Loop
from tests.e2e._proc import Server


@dataclass(frozen=True)
class View:
    """What one client shows of a session, in a shape every client can fill.

    `state` is the canonical state JSON when the client folds one (None for a chat room);
    `items` the timeline items in the order the client shows them; `usage` and
    `trace_ids` per turn, as shown.
    """

    state: str | None
    items: tuple[str, ...]
    usage: tuple[tuple[int, int] | None, ...]
    trace_ids: tuple[str | None, ...]


@dataclass(frozen=True)
class Answered:
    """How a client's answer to an input request ended, as the client tells its user."""

    won: bool
    winner: str  # the client id (or chat user) the client names as the answerer


def timeline_items(state: dict[str, Any]) -> tuple[str, ...]:
    """Every timeline item of every turn, a worker's items right after its card."""
    out: list[str] = []

    def walk(turn: dict[str, Any], timeline: list[dict[str, str]]) -> None:
        for ref in timeline:
            out.append(f"{ref['kind']}:{ref['id']}")
            if ref["kind"] == "worker":
                walk(turn, turn["workers"][ref["id"]]["timeline"])

    for turn in state["turns"]:
        walk(turn, turn["timeline"])
    return tuple(out)


@contextlib.contextmanager
def stalled(proc: subprocess.Popen[Any] | None, seconds: float = 3) -> Iterator[None]:
    """A client process that stalls: stopped (SIGSTOP) for `seconds` while the session
    moves on, its input backing up; then it runs again and must catch up."""
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)
    wake = threading.Timer(seconds, proc.send_signal, (signal.SIGCONT,))
    wake.start()
    try:
        yield
    finally:
        wake.cancel()
        proc.send_signal(signal.SIGCONT)


def view_of_state(state: dict[str, Any]) -> View:
    return View(
        state=state_to_json(state),  # type: ignore[arg-type]
        items=timeline_items(state),
        usage=tuple(
            (t["usage"]["input_tokens"], t["usage"]["output_tokens"]) for t in state["turns"]
        ),
        trace_ids=tuple(t["trace_id"] for t in state["turns"]),
    )


def _difference(name: str, mine: Any, theirs: Any) -> str:
    if name == "state" or not isinstance(mine, tuple):
        return name
    at = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b), None)
    if at is None:
        return f"{name} ({len(mine)} shown, {len(theirs)} on the Host)"
    return f"{name}[{at}]: {str(mine[at])[:60]!r} shown, {str(theirs[at])[:60]!r} on the Host"


class Driver:
    """One client of the Host. Every method acts or looks *through that client*."""

    column: str
    client_id: str
    #: Rows (test names) whose client-side assertion does not apply to this client, and
    #: what it does not show: the cell asserts the Host's facts and what the client does
    #: show, and the matrix prints the note next to its mark. Never a way to hide a failure.
    partial: ClassVar[dict[str, str]] = {}

    def __init__(self, server: Server, loop: Loop) -> None:
        self.server = server
        self.host = Host(server)
        self.loop = loop

    def close(self) -> None:
        """Stop every process or connection this driver started."""

    def start_turn(self, sid: str | None = None, text: str = DEMO) -> str:
        """Send `text` as a message (a new session when `sid` is None); the session id."""
        raise NotImplementedError

    def view(self, sid: str) -> View:
        raise NotImplementedError

    def quick(self, sid: str) -> str | None:
        """The canonical state this client holds, when reading it is cheaper than `view`."""
        return self.view(sid).state

    def expected(self, state: dict[str, Any]) -> View:
        """The Host's state as this client should show it."""
        return view_of_state(state)

    def received(self, sid: str) -> list[dict[str, Any]] | None:
        """The actions this client received live, in order, when it exposes them."""
        return None

    def answer(self, sid: str, rid: str, option_id: str) -> Answered:
        raise NotImplementedError

    def disconnect(self, sid: str) -> None:
        raise NotImplementedError

    def reconnect(self, sid: str) -> None:
        raise NotImplementedError

    def read_artifact(self, sid: str, artifact_id: str) -> bytes:
        raise NotImplementedError

    @contextlib.contextmanager
    def slow(self, sid: str) -> Iterator[None]:
        """While inside, this client consumes its stream slowly (or not at all)."""
        yield

    def converged(self, sid: str, timeout: float = 60) -> View:
        """Wait until this client shows what the Host holds now; that view."""
        last: list[Any] = []

        def same() -> View | None:
            theirs = self.expected(self.host.state(sid))
            held = self.quick(sid) if theirs.state is not None else None
            if theirs.state is not None and held != theirs.state:
                seq = json.loads(held)["seq"] if held else None
                host_seq = json.loads(theirs.state)["seq"]
                last[:] = [f"state (seq {seq} shown, {host_seq} on the Host)"]
                return None
            mine = self.view(sid)
            last[:] = [_difference(name, getattr(mine, name), getattr(theirs, name))
                       for name in ("items", "usage", "trace_ids", "state")
                       if getattr(mine, name) != getattr(theirs, name)]  # fmt: skip
            return mine if mine == theirs else None

        try:
            converged: View = wait_for(same, timeout=timeout, interval=0.3)
        except AssertionError:
            raise AssertionError(
                f"{self.column} never showed the Host's state: {', '.join(last)} differ"
            ) from None
        return converged


# --- the Python client ---------------------------------------------------------------


@dataclass
class _Follow:
    task: asyncio.Task[None] | None = None
    actions: list[dict[str, Any]] = field(default_factory=list)
    slow: bool = False


class PythonDriver(Driver):
    """`opennua.client`: one `Client`, a live `Subscription` per session."""

    column = "Python client"
    client_id = "cli_matrix_python"

    def __init__(self, server: Server, loop: Loop) -> None:
        super().__init__(server, loop)
        self.client = connect(server.url, server.token, client_id=self.client_id)
        self.follows: dict[str, _Follow] = {}
        self.sessions: dict[str, SessionClient] = {}

    def close(self) -> None:
        for sid in list(self.follows):
            self.disconnect(sid)
        self.loop.run(self.client.aclose())

    def start_turn(self, sid: str | None = None, text: str = DEMO) -> str:
        async def go() -> str:
            if sid is None:
                session = await self.client.create_session("matrix")
            else:
                session = self.client.session(sid)
            self._ensure_follow(session.session_id)
            await session.send_message(text)
            return session.session_id

        return self.loop.run(go())

    def _ensure_follow(self, sid: str) -> None:
        """Follow `sid` live from its first action; call on the driver's loop."""
        if sid not in self.follows:
            self.follows[sid] = _Follow()
            self._follow(sid, 0)

    def _follow(self, sid: str, after: int) -> None:
        follow = self.follows[sid]
        session = self.sessions.setdefault(sid, self.client.session(sid))

        async def consume() -> None:
            async with session.subscribe(after=after, replay_gaps=True) as live:
                async for event in live:
                    if isinstance(event, ActionEvent):
                        follow.actions.append(dict(event.raw))
                        if follow.slow:
                            await asyncio.sleep(0.05)

        follow.task = self.loop.loop.create_task(consume())

    def view(self, sid: str) -> View:
        task = self.follows[sid].task
        if task is not None and task.done() and not task.cancelled():
            task.result()  # the subscription died: say why
        return view_of_state(dict(self.sessions[sid].local.state))  # type: ignore[arg-type]

    def received(self, sid: str) -> list[dict[str, Any]]:
        return list(self.follows[sid].actions)

    def answer(self, sid: str, rid: str, option_id: str) -> Answered:
        async def go() -> Answered:
            try:
                resolution = await self.client.session(sid).answer(rid, option_id=option_id)
            except ConflictError as lost:
                assert lost.answered_by is not None, "a 409 names the winner"
                return Answered(False, str(lost.answered_by["client_id"]))
            return Answered(True, str(resolution["answered_by"]["client_id"]))

        return self.loop.run(go())

    def disconnect(self, sid: str) -> None:
        task = self.follows[sid].task

        async def stop() -> None:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

        self.loop.run(stop())

    def reconnect(self, sid: str) -> None:
        seq = int(self.sessions[sid].local.state["seq"])

        async def follow() -> None:
            self._follow(sid, seq)

        self.loop.run(follow())

    def read_artifact(self, sid: str, artifact_id: str) -> bytes:
        _, data = self.loop.run(self.client.read_artifact(artifact_id))
        return data

    @contextlib.contextmanager
    def slow(self, sid: str) -> Iterator[None]:
        self.follows[sid].slow = True
        try:
            yield
        finally:
            self.follows[sid].slow = False


# --- the CLI ---------------------------------------------------------------------------


class CliDriver(Driver):
    """`nua` as subprocesses: `run --json` is the live view, `show --json` the state."""

    column = "CLI"
    client_id = "cli_matrix_cli"

    def __init__(self, server: Server, loop: Loop) -> None:
        super().__init__(server, loop)
        self.live: dict[str, list[tuple[subprocess.Popen[bytes], Path]]] = {}
        self.dir = server.data / "cli-matrix"
        self.dir.mkdir(exist_ok=True)

    def _base(self) -> list[str]:
        url, data = self.server.url, str(self.server.data)
        return [sys.executable, "-m", "opennua.cli", "--url", url, "--data", data]

    def nua(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        command = [*self._base(), "--client-id", self.client_id, *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)

    def _spawn(self, sid: str | None, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        out = self.dir / f"live-{time.monotonic_ns()}.jsonl"
        with open(out, "wb") as sink:
            proc = subprocess.Popen(
                [*self._base(), "--client-id", self.client_id, *args],
                stdout=sink,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
            )
        return proc, out

    @staticmethod
    def _lines(out: Path) -> list[dict[str, Any]]:
        # Only whole lines: the process may be writing the next one.
        whole = out.read_text().split("\n")[:-1]
        return [json.loads(line) for line in whole if line.strip()]

    def close(self) -> None:
        for procs in self.live.values():
            for proc, _ in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)

    def start_turn(self, sid: str | None = None, text: str = DEMO) -> str:
        args = ["run", text, "--json", "--no-prompt"]
        if sid is not None:
            args += ["--session", sid]
            if self.live.get(sid):
                # One live view per session: a second `run` while one follows is a detach.
                detached = self.nua("run", text, "--session", sid, "--detach", "--json")
                assert detached.returncode == 0, detached.stderr
                return sid
        proc, out = self._spawn(sid, *args)

        def first_seq() -> str | None:
            lines = self._lines(out)
            return str(lines[0]["session_id"]) if lines else None

        found: str = wait_for(first_seq, timeout=60)
        self.live.setdefault(found, []).append((proc, out))
        return found

    def quick(self, sid: str) -> str | None:
        shown = self.nua("show", sid, "--json")
        assert shown.returncode == 0, shown.stderr
        return shown.stdout.strip()

    def view(self, sid: str) -> View:
        state = json.loads(self.quick(sid) or "")
        usage = self.nua("usage", sid, "--json")
        trace = self.nua("trace", sid, "--json")
        assert usage.returncode == 0 and trace.returncode == 0, usage.stderr + trace.stderr
        view = view_of_state(state)
        return View(
            state=view.state,
            items=view.items,
            usage=tuple(
                (t["usage"]["input_tokens"], t["usage"]["output_tokens"])
                for t in json.loads(usage.stdout)["turns"]
            ),
            trace_ids=tuple(t["trace_id"] for t in json.loads(trace.stdout)["turns"]),
        )

    def received(self, sid: str) -> list[dict[str, Any]]:
        """Every line the live views of `sid` printed, in order (waits for them to exit)."""
        out: list[dict[str, Any]] = []
        for proc, path in self.live.get(sid, []):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(60)
            out += self._lines(path)
        return out

    def answer(self, sid: str, rid: str, option_id: str) -> Answered:
        done = self.nua("answer", sid, rid, "--option", option_id, "--json")
        if done.returncode == 0:
            return Answered(True, json.loads(done.stdout)["answered_by"]["client_id"])
        assert done.returncode == 4, (done.returncode, done.stderr)
        # "already answered by cli_… (prn_…) …": the message names the winner.
        winner = next(w for w in done.stderr.replace("(", " ").split() if w.startswith("cli_"))
        return Answered(False, winner)

    def disconnect(self, sid: str) -> None:
        proc, _ = self.live[sid][-1]
        proc.send_signal(signal.SIGINT)  # Ctrl-C: detach, the task goes on
        assert proc.wait(30) == 130

    def reconnect(self, sid: str) -> None:
        _, out = self.live[sid][-1]
        after = self._lines(out)[-1]["seq"]
        self.live[sid].append(self._spawn(sid, "attach", sid, "--after", str(after), "--json"))

    def read_artifact(self, sid: str, artifact_id: str) -> bytes:
        target = self.dir / f"{artifact_id}.bin"
        got = self.nua("artifact", "get", artifact_id, "-o", str(target))
        assert got.returncode == 0, got.stderr
        return target.read_bytes()

    @contextlib.contextmanager
    def slow(self, sid: str) -> Iterator[None]:
        # A terminal nobody reads: the process is stopped, its socket fills.
        procs = [p for p, _ in self.live.get(sid, []) if p.poll() is None]
        for proc in procs:
            proc.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGCONT)
