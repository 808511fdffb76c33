"""Durable steps: ours vs LangGraph (SqliteSaver / PostgresSaver) vs DBOS (@DBOS.step).

A step persists a unique 300-byte payload durably. For us a step is one tool call that
returns the payload, recorded with its checkpoint step and its actions in one fenced store
transaction; the model asks for the calls in batches, so the next call's ledger `started`
rides in the transaction that records the previous result (one commit per step). Reported
for an idempotent tool and a side-effecting one. Prints steps/s and bytes stored per step:
what a run of the steps adds to a store that already holds one such run (the run before
it, in parentheses, also paid what a store pays once: the first pages of each table and
index a run writes to, PostgreSQL's free space maps: ~200 KB, ~100 bytes a step of
2,000). The rate is the second run's. DBOS's SQLite figure is its whole database with the
schema it creates at launch.

    pip install -e '.[bench]'
    python benchmarks/peers.py [--steps 2000] [--pg postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import secrets
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._durable import claim_journal
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, ToolCallPart
from pydantic_ai.usage import RequestUsage

from opennua.runtime import AgentLoop, DerivedIds, Limits, RunEnv, ToolContext, default_agent, tool
from opennua.runtime.testing import ScriptedModel, ScriptStep, call
from opennua.store import open_store

PAYLOAD = 300
BATCH = 50  # tool calls per model response
USAGE = RequestUsage(input_tokens=1200, output_tokens=400, cache_read_tokens=900)


def payload(i: int) -> str:
    return (f"{i:08d}" + secrets.token_hex(PAYLOAD))[:PAYLOAD]


async def ours(
    url: str,
    steps: int,
    idempotent: bool,
    data_dir: str | None,
    before_close: Callable[[], None] | None = None,
    executions: int = 1,
) -> tuple[float, int]:
    """`steps` durable steps split over `executions` running at once on one store: the
    store's writer puts the commits that arrive together into one transaction, one fsync."""

    @tool("emit", idempotent=idempotent)
    def emit(ctx: ToolContext, i: int) -> str:
        return payload(i)

    def script(steps: int) -> Callable[[list[Any]], ScriptStep]:
        def step(messages: list[Any]) -> ScriptStep:
            # O(1), like a peer's node function: every response before this one asked for
            # BATCH calls, and the history alternates request / response.
            done = min(len(messages) // 2 * BATCH, steps)
            if done >= steps:
                return ScriptStep(text="done", usage=USAGE)
            n = min(BATCH, steps - done)
            return ScriptStep(calls=tuple(call("emit", i=done + k) for k in range(n)), usage=USAGE)

        return step

    agent = dataclasses.replace(default_agent("scripted:bench"), tools=(emit,))
    store = await open_store(url, data_dir=data_dir)
    try:
        share = steps // executions
        loops = []
        for k in range(executions):
            journal, eid = await claim_journal(store, k + 1)
            env = RunEnv(
                execution_id=eid,
                root_run_id=f"run_01JD00000000000000000000{k:02d}",
                workdir=Path(data_dir or "."),
                ids=DerivedIds(f"bench{k}", ms=1_764_403_200_000),
            )
            model = ScriptedModel(script(share))
            loops.append(
                AgentLoop(agent, journal, env, model=model, limits=Limits(max_steps=share))
            )
        # pydantic builds its message (de)serializers lazily, once per process (~0.2 s);
        # pay that before timing, as the peers compile their graphs before theirs.
        ModelMessagesTypeAdapter.validate_python(
            ModelMessagesTypeAdapter.dump_python(
                [ModelResponse(parts=[ToolCallPart("emit", "{}")])], mode="json"
            )
        )
        t0 = time.perf_counter()
        outcomes = await asyncio.gather(*(loop.run("go") for loop in loops))
        elapsed = time.perf_counter() - t0
        assert all(type(o).__name__ == "Completed" for o in outcomes), outcomes
        if before_close is not None:
            before_close()  # e.g. read the WAL, which SQLite deletes at close
    finally:
        await store.close()
    return share * executions / elapsed, await _size(url, data_dir)


async def _size(url: str, data_dir: str | None) -> int:
    if url.startswith("sqlite"):
        path = url.removeprefix("sqlite:///")
        db = sqlite3.connect(path)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
        return _fsize(path)
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute("SELECT pg_database_size(current_database())")
        row = await cur.fetchone()
        return int(row[0]) if row else 0


async def _schema_size(url: str, data_dir: str | None) -> int:
    """The size of the store with its schema and nothing else: the bytes a step costs are
    what the steps add to it (opennua's schema is the whole product's, ~50 tables, each a
    few pages even when empty; counted in, it was ~1.5 KB a step of 1,000 on PostgreSQL)."""
    store = await open_store(url, data_dir=data_dir)
    await store.close()
    return await _size(url, data_dir)


class State(TypedDict):
    i: int
    data: str


def langgraph_run(saver: Any, steps: int, thread: str = "t") -> float:
    from langgraph.graph import END, START, StateGraph

    def node(state: State) -> State:
        return {"i": state["i"] + 1, "data": payload(state["i"])}

    def route(state: State) -> str:
        return END if state["i"] >= steps else "node"

    graph = StateGraph(State)
    graph.add_node("node", node)
    graph.add_edge(START, "node")
    graph.add_conditional_edges("node", route)
    app = graph.compile(checkpointer=saver)
    t0 = time.perf_counter()
    app.invoke(
        {"i": 0, "data": ""},
        {"configurable": {"thread_id": thread}, "recursion_limit": steps + 10},
    )
    return steps / (time.perf_counter() - t0)


def dbos_run(url: str, steps: int) -> float:
    from dbos import DBOS

    DBOS(config={"name": "bench", "system_database_url": url})

    @DBOS.step()
    def step(i: int) -> str:
        return payload(i)

    @DBOS.workflow()
    def flow() -> int:
        for i in range(steps):
            step(i)
        return steps

    DBOS.launch()
    t0 = time.perf_counter()
    flow()
    rate = steps / (time.perf_counter() - t0)
    DBOS.destroy()
    return rate


def _fsize(path: str) -> int:
    return os.path.getsize(path)


_CREATED: list[tuple[str, str]] = []  # (admin url, database) to drop at exit


def _pg_db(admin: str) -> str:
    import psycopg

    name = f"nua_bench_{secrets.token_hex(4)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    _CREATED.append((admin, name))
    return admin.rsplit("/", 1)[0] + "/" + name


def _drop_created() -> None:
    import psycopg

    for admin, name in _CREATED:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _row(name: str, rate: float, size: int | None, steps: int, first: int | None = None) -> None:
    per = (
        f"{size / steps:8.0f} B/step ({size / steps - PAYLOAD:6.0f} beyond payload" if size else ""
    )
    if size and first:
        per += f"; first run {first / steps - PAYLOAD:.0f})"
    elif size:
        per += ")"
    print(f"  {name:46s} {rate:8.0f} steps/s  {per}")


async def _twice(url: str, n: int, idem: bool, data_dir: str, k: int) -> tuple[float, int, int]:
    """(rate, bytes) of a run on a store that holds one run already; and the first run's."""
    empty = await _schema_size(url, data_dir if url.startswith("sqlite") else None)
    _, first = await ours(url, n, idem, data_dir, executions=k)
    rate, second = await ours(url, n, idem, data_dir, executions=k)
    return rate, second - first, first - empty


def _variants(executions: int) -> list[tuple[bool, int]]:
    """(idempotent, executions at once): one execution each way, then side-effecting
    steps of several executions, whose commits the store groups."""
    return [(True, 1), (False, 1)] + ([(False, executions)] if executions > 1 else [])


def _label(idempotent: bool, executions: int) -> str:
    kind = "idempotent" if idempotent else "side-effecting"
    return f"opennua ({kind} tool" + (f", {executions} at once)" if executions > 1 else ")")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument(
        "--pg",
        default=os.environ.get("NUA_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument(
        "--executions",
        type=int,
        default=8,
        help="executions at once for the grouped side-effecting row",
    )
    args = parser.parse_args()
    n = args.steps
    with tempfile.TemporaryDirectory() as tmp:
        print(f"SQLite, {n} durable steps of {PAYLOAD} B")
        for idem, k in _variants(args.executions):
            url = f"sqlite:///{tmp}/ours_{idem}_{k}.db"
            rate, size, first = await _twice(url, n, idem, tmp, k)
            _row(_label(idem, k), rate, size, n, first)
        if not args.no_peers:
            try:
                from langgraph.checkpoint.sqlite import SqliteSaver

                path = f"{tmp}/lg.db"
                with SqliteSaver.from_conn_string(path) as saver:
                    saver.setup()
                    empty = _fsize(path)
                    langgraph_run(saver, n, thread="first")
                    before = _fsize(path)
                    rate = langgraph_run(saver, n)
                _row("LangGraph SqliteSaver", rate, _fsize(path) - before, n, before - empty)
            except ImportError as exc:
                print(f"  LangGraph: not installed ({exc.name}); pip install -e '.[bench]'")
            try:
                path = f"{tmp}/dbos.db"
                rate = dbos_run(f"sqlite:///{path}", n)
                _row("DBOS @DBOS.step", rate, _fsize(path), n)
            except ImportError as exc:
                print(f"  DBOS: not installed ({exc.name}); pip install -e '.[bench]'")
        print(f"PostgreSQL, {n} durable steps of {PAYLOAD} B")
        try:
            for idem, k in _variants(args.executions):
                rate, size, first = await _twice(_pg_db(args.pg), n, idem, tmp, k)
                _row(_label(idem, k), rate, size, n, first)
        except Exception as exc:
            print(f"  opennua on PostgreSQL failed: {exc!r}")
        if not args.no_peers:
            try:
                from langgraph.checkpoint.postgres import PostgresSaver

                url = _pg_db(args.pg)
                with PostgresSaver.from_conn_string(url) as saver:
                    saver.setup()
                    empty = await _size(url, None)
                    langgraph_run(saver, n, thread="first")
                    before = await _size(url, None)
                    rate = langgraph_run(saver, n)
                after = await _size(url, None)
                _row("LangGraph PostgresSaver", rate, after - before, n, before - empty)
            except ImportError as exc:
                print(f"  LangGraph postgres: not installed ({exc.name})")
            try:
                url = _pg_db(args.pg)
                rate = dbos_run(url, n)
                _row("DBOS @DBOS.step", rate, None, n)
            except ImportError as exc:
                print(f"  DBOS: not installed ({exc.name})")
    print("goals: >= 3000 steps/s SQLite, >= 1500 PostgreSQL, <= 1 KB/step beyond payload")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    finally:
        _drop_created()
