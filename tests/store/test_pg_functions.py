"""The journal ops (append, fence, checkpoints, ledger), each defined once per backend:
SQLite's programs and PostgreSQL's server-side functions store the same bytes, give the
same seqs and fail with the same errors, whether a unit is one call or part of a
transaction. And the functions file is applied exactly when it should be."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from opennua.store import Fenced, NotFound, Store, WriteConflict, open_store
from opennua.store._actions import encode_actions
from opennua.store._json import dumps
from opennua.store._migrations import latest_version, migrate_postgres, postgres_functions
from opennua.store._pg_calls import text_array

from .conftest import action, execution

OLD_MIGRATIONS = Path(__file__).with_name("old_postgres_migrations")

TRICKY: list[dict[str, Any]] = [
    {"id": "a1", "type": "t"},
    {"id": "a2", "type": "t", "seq": 99, "z": [1, 2.5, None, True]},
    {"seq": None, "id": "a3", "type": "t", "session_id": "ses_x"},
    {"id": "a4", "type": 't"\\', "data": {"é": 'quo"te\\back\nnl\u2028', "{": "}"}},
    {"id": "a5", "type": "t", "data": "", "n": -0.0, "big": 10**30},
    {"id": 'a"6{,}', "type": "NULL", "data": "NULL"},
    # Bodies that contain the mark the seq is encoded around.
    {"id": "a7", "seq": None, "type": "t", "data": {"seq": 7_654_321_098_765_432_109}},
    {"id": "a8", "seq": None, "type": "t", 'x"seq': 7_654_321_098_765_432_109},
]


def _reference_body(a: dict[str, Any], seq: int) -> str:
    """What the body column holds (docs/store.md): the envelope with its seq, and 0 in
    place of the fields the row's columns hold, in the envelope's key order."""
    body = dict(a)
    body["session_id"] = body["id"] = body["type"] = 0
    body["seq"] = seq
    return dumps(body)


def test_encoded_bodies_are_the_stored_body_with_the_seq_left_out() -> None:
    for a in TRICKY:
        (encoded,) = encode_actions(None, [a])
        assert encoded.body(123) == _reference_body(a, 123), a


def test_text_array_round_trips_through_postgres_literals() -> None:
    assert text_array(["a", None, 'b"c\\d', "", "NULL", "{x,y}"]) == (
        '{"a",NULL,"b\\"c\\\\d","","NULL","{x,y}"}'
    )


async def _stored(store: Store, sid: str) -> list[tuple[int, str, dict[str, Any]]]:
    return [(a["seq"], a["id"], a) for a in await store.read(sid, after=0, limit=100)]


@pytest.mark.postgres
async def test_postgres_stores_what_sqlite_stores(pg_url: str, tmp_path: Path) -> None:
    results = []
    for url in (f"sqlite:///{tmp_path}/ref.db", pg_url):
        async with await open_store(url) as store:
            await store.create_session("ses_x", created_at=1.0)
            first = await store.append("ses_x", TRICKY[:3])
            # Repeats inside one append and re-appends keep their seq and write nothing.
            again = await store.append("ses_x", [TRICKY[1], *TRICKY[3:], TRICKY[3], TRICKY[0]])
            # More rows than the function looks up one by one: known ids, repeats, new.
            many = [action("ses_x", n) for n in range(10)]
            big = await store.append("ses_x", [*many[:5], TRICKY[2], many[0], *many[5:], TRICKY[7]])
            # The same through a transaction with another op (PostgreSQL: the function is
            # called inside the unit's transaction instead of as the whole unit).
            async with store.transaction() as tx:
                more = tx.append("ses_x", [action("ses_x", 1), TRICKY[4]])
                tx.put_snapshot("ses_x", 1, "{}")
            results.append((first, again, big, more.value, await _stored(store, "ses_x")))
    assert results[0] == results[1]
    assert results[0][1] == [2, 4, 5, 6, 7, 8, 4, 1]
    assert results[0][2] == [9, 10, 11, 12, 13, 3, 9, 14, 15, 16, 17, 18, 8]
    assert results[0][3] == [10, 5]


@pytest.mark.postgres
async def test_a_batch_with_a_missing_session_fails_only_that_caller(pg_url: str) -> None:
    async with await open_store(pg_url) as store:
        for sid in ("ses_a", "ses_c"):
            await store.create_session(sid, created_at=1.0)
        outcomes = await asyncio.gather(
            *(
                store.append(sid, [action(sid, n)] if n % 5 else [])  # empty ones too
                for n in range(20)
                for sid in ("ses_c", "ses_b", "ses_a")
            ),
            return_exceptions=True,
        )
        for i, outcome in enumerate(outcomes):
            if i % 3 == 1:
                assert isinstance(outcome, NotFound) and outcome.key == "ses_b"
            elif (i // 3) % 5 == 0:
                assert outcome == []
            else:
                assert isinstance(outcome, list) and len(outcome) == 1
        for sid in ("ses_a", "ses_c"):
            assert [s for s, _, _ in await _stored(store, sid)] == list(range(1, 17))


# A unit of journal ops alone is one call on PostgreSQL; with another op in it, it is a
# transaction that calls the function per op. Both must fail and roll back alike.
def _nothing(tx: Any) -> None:
    pass


def _snapshot(tx: Any) -> None:
    tx.put_snapshot("ses_f", 0, "{}")


# (before the journal ops, after them). With another op first, the fence is checked by a
# call of its own and the journal ops after it are a call without one.
MIXES: dict[str, tuple[Callable[[Any], None], Callable[[Any], None]]] = {
    "journal ops only": (_nothing, _nothing),
    "another op after": (_nothing, _snapshot),
    "another op first": (_snapshot, _nothing),
}


@pytest.mark.parametrize("mix", MIXES)
async def test_fenced_unit_errors_roll_back_everything(store: Store, clock: Any, mix: str) -> None:
    before, extra = MIXES[mix]
    await store.create_session("ses_f", created_at=clock.now)
    await store.create_execution(execution("exe_f", "ses_f", clock.now))
    claimed = await store.claim("sup", clock.now, 60.0)
    assert claimed is not None
    epoch = claimed.execution.epoch

    async with store.fenced("exe_f", epoch, owner="sup") as tx:
        before(tx)
        seqs = tx.append("ses_f", [action("ses_f", 1), action("ses_f", 2)])
        tx.put_checkpoint_step(1, b"one")
        tx.ledger_start("call_1", idempotency_key="k1", now=clock.now)
        extra(tx)
    assert seqs.value == [1, 2]

    async def attempt(fill: Any, owner: str | None = "sup", at: int = epoch) -> BaseException:
        with pytest.raises(Exception) as caught:
            async with store.fenced("exe_f", at, owner=owner) as tx:
                before(tx)
                tx.append("ses_f", [action("ses_f", 3)])
                fill(tx)
                extra(tx)
        return caught.value

    err = await attempt(lambda tx: tx.put_checkpoint_step(1, b"again"))
    assert isinstance(err, WriteConflict) and err.reason == "already recorded"
    err = await attempt(lambda tx: tx.ledger_mark_unknown("call_missing", now=clock.now))
    assert isinstance(err, NotFound) and (err.kind, err.key) == ("tool call", "call_missing")
    err = await attempt(lambda tx: tx.append("ses_missing", [action("ses_missing", 1)]))
    assert isinstance(err, NotFound) and (err.kind, err.key) == ("session", "ses_missing")

    def complete_then_restart(tx: Any) -> None:
        tx.ledger_complete("call_1", result={"ok": 1}, now=clock.now)
        tx.ledger_start("call_1", now=clock.now)

    err = await attempt(complete_then_restart)
    assert isinstance(err, WriteConflict) and err.reason == "already completed"
    err = await attempt(_nothing, at=epoch + 1)
    assert isinstance(err, Fenced) and (err.execution_id, err.epoch) == ("exe_f", epoch + 1)
    assert (err.current_epoch, err.status) == (epoch, "running")
    err = await attempt(_nothing, owner="someone else")
    assert isinstance(err, Fenced)
    # Nothing of the failed units landed: seq 3 is still free, call_1 still started.
    async with store.fenced("exe_f", epoch, owner="sup") as tx:
        before(tx)
        seqs = tx.append("ses_f", [action("ses_f", 3)])
        tx.ledger_mark_unknown("call_1", now=clock.now)
        tx.ledger_complete("call_1", result={"ok": 2}, now=clock.now)
        extra(tx)
    assert seqs.value == [3]
    ledger = await store.get_ledger("exe_f")
    assert [(e.tool_call_id, e.status, e.result) for e in ledger] == [
        ("call_1", "completed", {"ok": 2})
    ]
    err = await attempt(lambda tx: tx.ledger_mark_unknown("call_1", now=clock.now))
    assert isinstance(err, WriteConflict) and err.reason == "is completed, not started"
    assert [s for s, _, _ in await _stored(store, "ses_f")] == [1, 2, 3]
    err = await attempt(_nothing, at=epoch + 1)
    assert isinstance(err, Fenced)
    with pytest.raises(NotFound):
        async with store.fenced("exe_nope", 1) as tx:
            before(tx)
            tx.put_checkpoint_step(9, b"x")
            extra(tx)


# -- the functions file ---------------------------------------------------------------


async def _functions(url: str) -> dict[str, tuple[str, int]]:
    """Every nua_* function: its signature -> (body, xmin of its catalog row)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT p.oid::regprocedure::text, p.prosrc, p.xmin::text::bigint FROM pg_proc p "
            "WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'nua%%'"
        )
        return {r[0]: (r[1], r[2]) for r in await cur.fetchall()}


async def _fresh_functions(admin_url: str) -> dict[str, str]:
    """The functions a new database gets (what "exactly the current bodies" means)."""
    name = f"nua_test_fresh_{secrets.token_hex(4)}"
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    url = admin_url.rsplit("/", 1)[0] + "/" + name
    try:
        async with await open_store(url):
            pass
        return {sig: body for sig, (body, _) in (await _functions(url)).items()}
    finally:
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
async def test_a_database_migrated_by_the_old_function_migrations_gets_the_current_ones(
    pg_url: str, pg_admin_url: str, clock: Any
) -> None:
    # What an opennua before this change left behind: migrations 1-5, where 3-5 created
    # (and replaced) the functions, and some data written through them.
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        assert await migrate_postgres(conn, target=2) == 2
        for path in sorted(OLD_MIGRATIONS.glob("*.sql")):
            await conn.execute(path.read_bytes())
            await conn.execute(
                "INSERT INTO schema_version VALUES (%s, %s)", (int(path.name[:4]), path.name)
            )
        await conn.execute(
            "INSERT INTO sessions (session_id, created_at, last_seq) VALUES ('ses_old', 1, 0)"
        )
        (encoded,) = encode_actions("ses_old", [action("ses_old", 1)])
        await conn.execute(
            "SELECT nua_append_rows(%s::text[], %s::int[], %s::text[], %s::text[], %s::text[], "
            "%s::text[], %s::text[])",
            (
                ["ses_old"],
                [1],
                ["ses_old"],
                [encoded.action_id],
                [encoded.type],
                [encoded.head],
                [encoded.tail],
            ),
        )
    old = await _functions(pg_url)
    assert {"nua_append_rows", "nua_unit", "nua_notify"} <= {s.split("(")[0] for s in old}

    async with await open_store(pg_url) as store:
        assert await store.read("ses_old") == [{**action("ses_old", 1), "seq": 1}]
        assert await store.append("ses_old", [action("ses_old", 1), action("ses_old", 2)]) == [
            1,
            2,
        ]
        await store.create_execution(execution("exe_1", "ses_old", clock.now))
        claimed = await store.claim("sup", clock.now, 60.0)
        assert claimed is not None
        async with store.fenced("exe_1", claimed.epoch) as tx:
            step = tx.append("ses_old", [action("ses_old", 3)])
            tx.put_checkpoint_step(1, b"step")
            tx.ledger_start("call_1", now=clock.now)
        assert step.value == [3]

    current = {sig: body for sig, (body, _) in (await _functions(pg_url)).items()}
    assert current == await _fresh_functions(pg_admin_url)
    assert [s.split("(")[0] for s in current] == ["nua_unit"]
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT max(version) FROM schema_version")
        assert await cur.fetchone() == (latest_version("postgres"),)


@pytest.mark.postgres
async def test_opening_again_does_not_reapply_the_functions_and_a_change_does(
    pg_url: str,
) -> None:
    async with await open_store(pg_url):
        pass
    first = await _functions(pg_url)
    async with await open_store(pg_url):
        pass
    assert await _functions(pg_url) == first  # same catalog rows: nothing was re-created
    # A changed file (a newer opennua's) is applied on the next open.
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute("UPDATE server_functions SET sha256 = 'an older file'")
    async with await open_store(pg_url) as store:
        await store.create_session("ses_a", created_at=1.0)
        assert await store.append("ses_a", [action("ses_a", 1)]) == [1]
    again = await _functions(pg_url)
    assert {s: b for s, (b, _) in again.items()} == {s: b for s, (b, _) in first.items()}
    assert {x for _, x in again.values()} != {x for _, x in first.values()}
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT sha256 FROM server_functions")
        (digest,) = await cur.fetchall()
    assert digest == (hashlib.sha256(postgres_functions().encode()).hexdigest(),)


@pytest.mark.postgres
async def test_concurrent_openers_of_a_new_database_all_work(pg_url: str) -> None:
    stores = await asyncio.gather(*(open_store(pg_url) for _ in range(4)))
    try:
        await stores[0].create_session("ses_a", created_at=1.0)
        seqs = await asyncio.gather(
            *(s.append("ses_a", [action("ses_a", i)]) for i, s in enumerate(stores))
        )
        assert sorted(s for (s,) in seqs) == [1, 2, 3, 4]
    finally:
        for s in stores:
            await s.close()
    assert [s.split("(")[0] for s in await _functions(pg_url)] == ["nua_unit"]
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT count(*) FROM server_functions")
        assert await cur.fetchone() == (1,)
