"""The PostgreSQL one-call fast path (``_pg_fast`` + migration 0003) against the shared
op programs: same bytes stored, same seqs, same errors. (The whole contract suite also
runs on PostgreSQL with the fast path off: the ``postgres-programs`` backend.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from opennua.store import Conflict, Fenced, NotFound, Store, open_store
from opennua.store._log_ops import stored_body
from opennua.store._pg_fast import split_body, text_array
from opennua.store._postgres import PostgresStore
from opennua.store._sql import dumps

from .conftest import action, execution

TRICKY: list[dict[str, Any]] = [
    {"id": "a1", "type": "t"},
    {"id": "a2", "type": "t", "seq": 99, "z": [1, 2.5, None, True]},
    {"seq": None, "id": "a3", "type": "t", "session_id": "ses_x"},
    {"id": "a4", "type": 't"\\', "data": {"é": 'quo"te\\back\nnl\u2028', "{": "}"}},
    {"id": "a5", "type": "t", "data": "", "n": -0.0, "big": 10**30},
    {"id": 'a"6{,}', "type": "NULL", "data": "NULL"},
]


def test_split_body_is_byte_identical_to_dumps() -> None:
    for a in TRICKY:
        head, tail = split_body(a)
        assert head + "123" + tail == dumps(stored_body(a, 123))


def test_text_array_round_trips_through_postgres_literals() -> None:
    assert text_array(["a", None, 'b"c\\d', "", "NULL", "{x,y}"]) == (
        '{"a",NULL,"b\\"c\\\\d","","NULL","{x,y}"}'
    )


async def _stored(store: Store, sid: str) -> list[tuple[int, str, dict[str, Any]]]:
    return [(a["seq"], a["id"], a) for a in await store.read(sid, after=0, limit=100)]


@pytest.mark.postgres
@pytest.mark.parametrize("fast", [True, False])
async def test_fast_path_stores_what_sqlite_stores(
    pg_url: str, tmp_path: Path, fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(PostgresStore, "fast_path", fast)
    results = []
    for url in (f"sqlite:///{tmp_path}/ref.db", pg_url):
        async with await open_store(url) as store:
            await store.create_session("ses_x", created_at=1.0)
            first = await store.append("ses_x", TRICKY[:3])
            # Repeats inside one append and re-appends keep their seq and write nothing.
            again = await store.append("ses_x", [TRICKY[1], *TRICKY[3:], TRICKY[3], TRICKY[0]])
            results.append((first, again, await _stored(store, "ses_x")))
    assert results[0] == results[1]
    assert results[0][1] == [2, 4, 5, 6, 4, 1]


@pytest.mark.postgres
async def test_a_batch_with_a_missing_session_fails_only_that_caller(pg_url: str) -> None:
    async with await open_store(pg_url) as store:
        for sid in ("ses_a", "ses_c"):
            await store.create_session(sid, created_at=1.0)
        outcomes = await asyncio.gather(
            *(
                store.append(sid, [action(sid, n)])
                for n in range(20)
                for sid in ("ses_c", "ses_b", "ses_a")
            ),
            return_exceptions=True,
        )
        for i, outcome in enumerate(outcomes):
            if i % 3 == 1:
                assert isinstance(outcome, NotFound)
            else:
                assert isinstance(outcome, list) and len(outcome) == 1
        for sid in ("ses_a", "ses_c"):
            assert [s for s, _, _ in await _stored(store, sid)] == list(range(1, 21))


async def test_fenced_unit_errors_roll_back_everything(store: Store, clock: Any) -> None:
    await store.create_session("ses_f", created_at=clock.now)
    await store.create_execution(execution("exe_f", "ses_f", clock.now))
    claimed = await store.claim("sup", clock.now, 60.0)
    assert claimed is not None
    epoch = claimed.execution.epoch

    async with store.fenced("exe_f", epoch, owner="sup") as tx:
        seqs = tx.append("ses_f", [action("ses_f", 1), action("ses_f", 2)])
        tx.put_checkpoint_step(1, b"one")
        tx.ledger_start("call_1", idempotency_key="k1", now=clock.now)
    assert seqs.value == [1, 2]

    async def attempt(fill: Any, owner: str | None = "sup", at: int = epoch) -> BaseException:
        with pytest.raises(Exception) as caught:
            async with store.fenced("exe_f", at, owner=owner) as tx:
                tx.append("ses_f", [action("ses_f", 3)])
                fill(tx)
        return caught.value

    def nothing(tx: Any) -> None:
        pass

    err = await attempt(lambda tx: tx.put_checkpoint_step(1, b"again"))
    assert isinstance(err, Conflict)
    err = await attempt(lambda tx: tx.ledger_mark_unknown("call_missing", now=clock.now))
    assert isinstance(err, NotFound)
    err = await attempt(lambda tx: tx.append("ses_missing", [action("ses_missing", 1)]))
    assert isinstance(err, NotFound)

    def complete_then_restart(tx: Any) -> None:
        tx.ledger_complete("call_1", result={"ok": 1}, now=clock.now)
        tx.ledger_start("call_1", now=clock.now)

    err = await attempt(complete_then_restart)
    assert isinstance(err, Conflict)
    err = await attempt(nothing, at=epoch + 1)
    assert isinstance(err, Fenced) and err.current_epoch == epoch and err.status == "running"
    err = await attempt(nothing, owner="someone else")
    assert isinstance(err, Fenced)
    # Nothing of the failed units landed: seq 3 is still free, call_1 still started.
    async with store.fenced("exe_f", epoch, owner="sup") as tx:
        seqs = tx.append("ses_f", [action("ses_f", 3)])
        tx.ledger_mark_unknown("call_1", now=clock.now)
        tx.ledger_complete("call_1", result={"ok": 2}, now=clock.now)
    assert seqs.value == [3]
    ledger = await store.get_ledger("exe_f")
    assert [(e.tool_call_id, e.status) for e in ledger] == [("call_1", "completed")]
    err = await attempt(lambda tx: tx.ledger_mark_unknown("call_1", now=clock.now))
    assert isinstance(err, Conflict)
    assert [s for s, _, _ in await _stored(store, "ses_f")] == [1, 2, 3]
