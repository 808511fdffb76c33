"""Sessions, the action log, snapshots and wake-ups."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import psycopg
import pytest

from opennua.store import (
    MAX_SNAPSHOTS_DUE,
    InvalidInput,
    NotFound,
    SessionFilter,
    SessionRecord,
    Store,
    WriteConflict,
    open_store,
    snapshot_due,
)
from opennua.store._bodies import unpack
from opennua.store._json import dumps

from .conftest import action


async def test_append_assigns_gapless_seqs_and_read_returns_them(store: Store) -> None:
    await store.create_session("ses_a", created_at=1.0, title="first", principal_id="prn_1")
    assert await store.append("ses_a", [action("ses_a", 1), action("ses_a", 2)]) == [1, 2]
    assert await store.append("ses_a", [action("ses_a", 3)]) == [3]
    got = await store.read("ses_a")
    assert [a["seq"] for a in got] == [1, 2, 3]
    assert got[0] == {**action("ses_a", 1), "seq": 1}
    assert list(got[0])[:4] == ["v", "session_id", "seq", "id"]  # envelope order kept
    assert [a["seq"] for a in await store.read("ses_a", after=1, limit=1)] == [2]
    assert (await store.get_session("ses_a")).last_seq == 3


async def test_reappending_a_known_action_id_returns_its_seq_and_writes_nothing(
    store: Store,
) -> None:
    await store.create_session("ses_a", created_at=1.0)
    await store.append("ses_a", [action("ses_a", 1), action("ses_a", 2)])
    # A resumed attempt re-emits action 2 and then a new one.
    assert await store.append("ses_a", [action("ses_a", 2), action("ses_a", 3)]) == [2, 3]
    # The same id twice in one call is one action.
    assert await store.append("ses_a", [action("ses_a", 4), action("ses_a", 4)]) == [4, 4]
    assert [a["seq"] for a in await store.read("ses_a")] == [1, 2, 3, 4]


async def test_append_rejects_unknown_session_and_bad_envelopes(store: Store) -> None:
    with pytest.raises(NotFound) as caught:
        await store.append("ses_missing", [action("ses_missing", 1)])
    assert (caught.value.kind, caught.value.key) == ("session", "ses_missing")
    await store.create_session("ses_a", created_at=1.0)
    with pytest.raises(InvalidInput):
        await store.append("ses_a", [{"type": "x"}])
    with pytest.raises(InvalidInput):
        await store.append("ses_a", [action("ses_b", 1)])
    assert await store.read("ses_a") == []


async def test_eight_concurrent_appenders_on_one_session_get_seqs_1_to_n(store: Store) -> None:
    await store.create_session("ses_hot", created_at=1.0)

    async def appender(w: int) -> list[tuple[int, str]]:
        out = []
        for k in range(25):
            batch = [action("ses_hot", w * 1000 + k * 10 + j) for j in range(1 + k % 3)]
            seqs = await store.append("ses_hot", batch)
            out += zip(seqs, [a["id"] for a in batch], strict=True)
        return out

    results = await asyncio.gather(*(appender(w) for w in range(8)))
    claimed = [pair for result in results for pair in result]
    n = len(claimed)
    assert sorted(seq for seq, _ in claimed) == list(range(1, n + 1))
    log = await store.read("ses_hot", limit=10_000)
    assert [a["seq"] for a in log] == list(range(1, n + 1))
    assert {a["seq"]: a["id"] for a in log} == dict(claimed)
    for result in results:  # each appender saw its own appends in increasing order
        seqs = [seq for seq, _ in result]
        assert seqs == sorted(seqs)


async def test_hundred_sessions_in_parallel_each_stay_gapless(store: Store) -> None:
    sessions = [f"ses_{i:03d}" for i in range(100)]
    await asyncio.gather(
        *(store.create_session(s, created_at=float(i)) for i, s in enumerate(sessions))
    )

    async def writer(sid: str) -> None:
        for k in range(10):
            await store.append(sid, [action(sid, k)])

    await asyncio.gather(*(writer(s) for s in sessions))
    for sid in sessions:
        log = await store.read(sid)
        assert [a["seq"] for a in log] == list(range(1, 11))
        assert all(a["session_id"] == sid for a in log)


async def test_sessions_create_get_list_and_retitle(store: Store) -> None:
    for i in range(5):
        await store.create_session(
            f"ses_{i}",
            created_at=100.0 + i // 2,  # ties on created_at must still page stably
            workspace_id="wsp_1" if i % 2 else "wsp_2",
            principal_id="prn_1",
            title=f"t{i}",
            plugin_digest="sha256:p",
            deployment_digest="sha256:d",
            metadata={"k": i},
        )
    with pytest.raises(WriteConflict):
        await store.create_session("ses_0", created_at=1.0)
    s3 = await store.get_session("ses_3")
    assert (s3.workspace_id, s3.title, s3.metadata, s3.last_seq) == ("wsp_1", "t3", {"k": 3}, 0)
    seen, cursor = [], None
    while True:
        page = await store.list_session_summaries(limit=2, cursor=cursor)
        seen += [s.session.session_id for s in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ["ses_4", "ses_3", "ses_2", "ses_1", "ses_0"]
    only = await store.list_session_summaries(where=SessionFilter(workspace_id="wsp_1"))
    assert [s.session.session_id for s in only.items] == ["ses_3", "ses_1"]
    await store.update_session_title("ses_3", "renamed")
    assert (await store.get_session("ses_3")).title == "renamed"
    with pytest.raises(NotFound):
        await store.get_session("ses_nope")


async def test_the_session_list_filters_by_principal_creation_time_and_title(
    store: Store,
) -> None:
    titles = ["Quarterly REPORT", "report: 100% done", "notes", "a_b", None]
    for i, title in enumerate(titles):
        await store.create_session(
            f"ses_{i}", created_at=100.0 + i, principal_id=f"prn_{i % 2}", title=title
        )

    async def ids(**where: object) -> list[str]:
        page = await store.list_session_summaries(where=SessionFilter(**where))  # type: ignore[arg-type]
        return [s.session.session_id for s in page.items]

    assert await ids(principal_id="prn_1") == ["ses_3", "ses_1"]
    assert await ids(since=101.0, until=103.0) == ["ses_2", "ses_1"]
    assert await ids(title="report") == ["ses_1", "ses_0"]  # any case
    # LIKE's wildcards are only themselves: `%` is no "anything", `_` no "any one".
    assert await ids(title="100%") == ["ses_1"]
    assert await ids(title="a_b") == ["ses_3"]
    assert await ids(title="_") == ["ses_3"]
    assert await ids(needs_input=False, principal_id="prn_0") == ["ses_4", "ses_2", "ses_0"]
    assert await ids(needs_input=True) == []
    # The keyset holds under a filter: pages of one, in order, nothing twice.
    seen, cursor = [], None
    while True:
        page = await store.list_session_summaries(
            limit=1, cursor=cursor, where=SessionFilter(principal_id="prn_0")
        )
        seen += [s.session.session_id for s in page.items]
        if (cursor := page.next_cursor) is None:
            break
    assert seen == ["ses_4", "ses_2", "ses_0"]


async def test_snapshot_keeps_the_newest(store: Store) -> None:
    await store.create_session("ses_a", created_at=1.0)
    assert await store.get_snapshot("ses_a") is None
    await store.put_snapshot("ses_a", 500, json.dumps({"seq": 500}))
    await store.put_snapshot("ses_a", 300, json.dumps({"seq": 300}))  # late and older: ignored
    snap = await store.get_snapshot("ses_a")
    assert snap is not None and snap.seq == 500 and json.loads(snap.state_json) == {"seq": 500}


async def test_snapshots_due_after_a_turn_ended_or_every_n_actions_since_the_snapshot(
    store: Store,
) -> None:
    async def due(*session_ids: str) -> set[str]:
        return await store.snapshots_due(list(session_ids), 3)

    assert await due() == set()
    assert await due("ses_nope") == set()
    await store.create_session("ses_a", created_at=1.0)
    await store.create_session("ses_b", created_at=1.0)
    assert await due("ses_a", "ses_b") == set()  # nothing to snapshot
    await store.append("ses_a", [action("ses_a", 1), action("ses_a", 2)])
    await store.append("ses_b", [action("ses_b", 1, kind="turn.ended")])
    assert await due("ses_a", "ses_b", "ses_nope") == {"ses_b"}  # b: a turn ended
    await store.append("ses_a", [action("ses_a", 3)])
    assert await due("ses_a", "ses_b") == {"ses_a", "ses_b"}  # a: 3 actions since the start
    await store.put_snapshot("ses_a", 3, "{}")
    assert await due("ses_a") == set()
    await store.append("ses_a", [action("ses_a", 4, kind="turn.ended")])
    assert await due("ses_a") == {"ses_a"}  # a turn ended since the snapshot
    await store.put_snapshot("ses_a", 4, "{}")
    await store.append("ses_a", [action("ses_a", 5)])
    assert await due("ses_a") == set()  # the turn ended before it
    with pytest.raises(InvalidInput):
        await store.snapshots_due([f"ses_{n}" for n in range(MAX_SNAPSHOTS_DUE + 1)], 3)


async def test_a_long_logs_snapshot_waits_until_the_log_grew_by_a_twentieth(
    store: Store,
) -> None:
    # Storing a snapshot costs the whole state: a session 400 actions long does not store
    # another at every turn end, only once the log grew by a twentieth (20) since.
    await store.create_session("ses_a", created_at=1.0)
    await store.append("ses_a", [action("ses_a", n) for n in range(1, 401)])
    await store.put_snapshot("ses_a", 400, "{}")
    await store.append("ses_a", [action("ses_a", 401), action("ses_a", 402, kind="turn.ended")])
    assert await store.snapshots_due(["ses_a"], 500) == set()  # 2 < 400 / 20
    await store.append("ses_a", [action("ses_a", n) for n in range(403, 420)])
    assert await store.snapshots_due(["ses_a"], 500) == set()  # 19: not yet
    await store.append("ses_a", [action("ses_a", 420)])
    assert await store.snapshots_due(["ses_a"], 500) == {"ses_a"}  # 20, a turn ended
    # Without a turn end, `every` actions (and the twentieth) make it due.
    await store.put_snapshot("ses_a", 420, "{}")
    await store.append("ses_a", [action("ses_a", n) for n in range(421, 460)])
    assert await store.snapshots_due(["ses_a"], 39) == {"ses_a"}
    assert await store.snapshots_due(["ses_a"], 40) == set()
    await store.put_snapshot("ses_a", 459, "{}")
    await store.append("ses_a", [action("ses_a", n) for n in range(460, 470)])
    assert await store.snapshots_due(["ses_a"], 5) == set()  # 10 < 459 / 20


@pytest.mark.parametrize(
    ("last", "stored", "ended", "due"),
    [
        (0, 0, True, False),  # nothing since
        (3, 0, True, True),  # a first turn ended
        (3, 0, False, False),
        (500, 0, False, True),  # `every` actions
        (9_300, 9_000, True, False),  # a long session: 300 < 9,000 / 20
        (9_450, 9_000, True, True),
        (9_450, 9_000, False, False),  # no turn ended, 450 < every
        (9_600, 9_000, False, True),
        (100_000, 90_000, False, True),
    ],
)
def test_snapshot_due_needs_an_occasion_and_a_twentieth_of_growth(
    last: int, stored: int, ended: bool, due: bool
) -> None:
    assert snapshot_due(last, stored, ended, 500) is due


async def test_last_workspace_manifest_is_the_newest_that_names_one(store: Store) -> None:
    await store.create_session("ses_a", created_at=1.0)
    assert await store.last_workspace_manifest("ses_a") is None
    assert await store.last_workspace_manifest("ses_nope") is None

    def workspace(n: int, kind: str, manifest: str | None) -> dict[str, object]:
        return action("ses_a", n, kind=kind, manifest=manifest, files=1, bytes=1)

    await store.append("ses_a", [action("ses_a", 1), workspace(2, "workspace.committed", "mf_1")])
    assert await store.last_workspace_manifest("ses_a") == "mf_1"
    await store.append("ses_a", [workspace(3, "workspace.restored", "mf_1")])
    await store.append("ses_a", [action("ses_a", n) for n in range(4, 60)])
    await store.append("ses_a", [workspace(60, "workspace.committed", "mf_2")])
    await store.append("ses_a", [action("ses_a", n) for n in range(61, 90)])
    assert await store.last_workspace_manifest("ses_a") == "mf_2"
    # Newer workspace actions that name none (more than one read's worth) are passed over.
    await store.append("ses_a", [workspace(n, "workspace.restored", None) for n in range(90, 130)])
    assert await store.last_workspace_manifest("ses_a") == "mf_2"
    await store.append("ses_a", [workspace(130, "workspace.restored", "mf_3")])
    assert await store.last_workspace_manifest("ses_a") == "mf_3"


async def test_transaction_commits_everything_or_nothing(store: Store) -> None:
    await store.create_session("ses_a", created_at=1.0)
    async with store.transaction() as tx:
        first = tx.append("ses_a", [action("ses_a", 1)])
        tx.put_snapshot("ses_a", 1, "{}")
        tx.append("ses_a", [action("ses_a", 2)])
    assert first.value == [1]
    assert tx.seqs == {"ses_a": [1, 2]}
    # One failing op (a duplicate session) voids the whole unit: the append is not kept.
    with pytest.raises(WriteConflict):
        async with store.transaction() as tx:
            tx.append("ses_a", [action("ses_a", 3)])
            tx.create_session(SessionRecord(session_id="ses_a", created_at=2.0))
    assert [a["seq"] for a in await store.read("ses_a")] == [1, 2]
    # An exception inside the block sends nothing at all.
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            tx.append("ses_a", [action("ses_a", 4)])
            raise RuntimeError("caller changed its mind")
    assert (await store.get_session("ses_a")).last_seq == 2


async def test_watch_wakes_after_commit(store: Store) -> None:
    await store.create_session("ses_a", created_at=1.0)
    async with store.watch() as watcher:
        await store.append("ses_a", [action("ses_a", 1), action("ses_a", 2)])
        assert await asyncio.wait_for(anext(watcher), 5) == ("ses_a", 2)


async def test_watch_batch_takes_what_is_pending_oldest_first_up_to_a_limit(store: Store) -> None:
    for sid in ("ses_a", "ses_b", "ses_c"):
        await store.create_session(sid, created_at=1.0)
    watcher = store.watch()
    sentinel = store.watch()  # wake-ups fan out to every watcher at once, in order
    for sid in ("ses_a", "ses_b", "ses_c"):
        await store.append(sid, [action(sid, 1)])
    await store.append("ses_a", [action("ses_a", 2)])  # coalesced, keeps its place

    async def all_delivered() -> None:
        # On PostgreSQL wake-ups arrive by NOTIFY after the append returns: once the
        # sentinel has the last one, `watcher` holds all four.
        seen: set[tuple[str, int]] = set()
        while ("ses_a", 2) not in seen:
            seen.update(await sentinel.batch(10))

    await asyncio.wait_for(all_delivered(), 5)
    sentinel.close()
    assert await asyncio.wait_for(watcher.batch(2), 5) == [("ses_a", 2), ("ses_b", 1)]
    assert await asyncio.wait_for(watcher.batch(2), 5) == [("ses_c", 1)]
    waiting = asyncio.ensure_future(watcher.batch(2))
    await asyncio.sleep(0.05)
    assert not waiting.done()  # nothing pending: it waits
    watcher.close()
    assert await asyncio.wait_for(waiting, 5) == []  # closed: empty


@pytest.mark.postgres
async def test_notify_wakes_another_store_instance(pg_url: str) -> None:
    # Two Store instances = two processes as far as PostgreSQL can tell.
    async with await open_store(pg_url) as writer, await open_store(pg_url) as reader:
        await writer.create_session("ses_x", created_at=1.0)
        async with reader.watch() as watcher:
            await writer.append("ses_x", [action("ses_x", 1)])
            assert await asyncio.wait_for(anext(watcher), 5) == ("ses_x", 1)
            assert [a["seq"] for a in await reader.read("ses_x")] == [1]


@pytest.mark.postgres
async def test_appenders_in_two_processes_share_one_gapless_sequence(pg_url: str) -> None:
    # Two Store instances are two processes to PostgreSQL: only the session-row lock
    # keeps their seqs apart and in commit order.
    async with await open_store(pg_url) as a, await open_store(pg_url) as b:
        await a.create_session("ses_hot", created_at=1.0)

        async def appender(store: Store, w: int) -> list[int]:
            seqs = []
            for k in range(40):
                seqs += await store.append("ses_hot", [action("ses_hot", w * 1000 + k)])
            return seqs

        results = await asyncio.gather(*(appender((a, b)[w % 2], w) for w in range(8)))
        seqs = sorted(s for r in results for s in r)
        assert seqs == list(range(1, 8 * 40 + 1))
        log = await b.read("ses_hot", limit=10_000)
        assert [x["seq"] for x in log] == seqs


async def _raw(url: str, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Run SQL on the store's database behind its back (``?`` placeholders)."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return list(db.execute(sql, params))
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]
        return list(await cur.fetchall()) if cur.description else []


@pytest.mark.on_disk
async def test_bodies_leave_out_the_column_fields_and_old_rows_still_read(
    store: Store, store_url: str
) -> None:
    await store.create_session("ses_long_session_id_0001", created_at=1.0)
    sent = action("ses_long_session_id_0001", 1, kind="tool_call.updated")
    await store.append("ses_long_session_id_0001", [sent])
    ((stored,),) = await _raw(store_url, "SELECT body FROM actions WHERE seq = 1")
    # Both store the body deflated against the dictionary: a third of the text.
    assert isinstance(stored, bytes) and stored[0] == 1
    text = unpack(stored)
    assert isinstance(text, bytes) and len(stored) < 0.5 * len(text)
    assert b"ses_long_session_id_0001" not in text and sent["id"].encode() not in text
    assert b"tool_call.updated" not in text and json.loads(text)["type"] == 0
    # PostgreSQL numbers the row inside its append function: the body holds 0 for it.
    assert json.loads(text)["seq"] == (1 if store_url.startswith("sqlite") else 0)
    (got,) = await store.read("ses_long_session_id_0001")
    assert got == {**sent, "seq": 1} and list(got) == list(sent)  # whole, in envelope order

    # A row written whole, as JSON text (before bodies left the column fields out and
    # before they were compressed), reads as it was: on PostgreSQL, the text's UTF-8
    # bytes since the column became BYTEA.
    old = {**action("ses_long_session_id_0001", 2), "session_id": "ses_long_session_id_0001"}
    old["seq"] = 2
    sqlite = store_url.startswith("sqlite")
    await _raw(
        store_url,
        "INSERT INTO action_log (sk, seq, action_id, type, body) "
        "VALUES ((SELECT sk FROM sessions WHERE session_id = ?), 2, ?, ?, ?)",
        (
            "ses_long_session_id_0001",
            old["id"],
            old["type"],
            json.dumps(old) if sqlite else json.dumps(old).encode(),
        ),
    )
    assert (await store.read("ses_long_session_id_0001", after=1)) == [old]


def test_dumps_is_compact_json_and_falls_back_for_what_orjson_refuses() -> None:
    value = {"é": '\u2028 "q" \\', "n": [1, 2.5, -0.0, None, True], "big": 10**30}
    text = dumps(value)  # a 100-bit integer: the standard library writes it
    assert text == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert json.loads(text) == value
    assert dumps({1: "a"}) == '{"1":"a"}'  # non-string keys, as the standard library does
    assert dumps({"a": [1, "b"]}) == '{"a":[1,"b"]}'
    # What neither encoder writes is refused as the store's own error, naming the field.
    with pytest.raises(InvalidInput, match="the thing cannot be stored as JSON"):
        dumps({"when": object()}, "the thing")


async def test_every_read_is_a_scheduling_point(store: Store) -> None:
    # SQLite reads run on the loop's own thread; a task that only reads (a poll) must
    # still let the others run, as a read handed to another thread did.
    await store.create_session("ses_a", created_at=1.0)
    others = 0

    async def other() -> None:
        nonlocal others
        others += 1

    for n in range(1, 4):
        asyncio.get_running_loop().create_task(other())
        await store.get_session("ses_a")
        assert others == n
