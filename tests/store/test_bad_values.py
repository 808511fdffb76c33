"""A unit that fails, for a bad value or a bug, fails alone: the writer rolls it back, the
units committed with it keep their writes, and the next write works (issue 12, bug 1)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from opennua.store import Execution, InvalidInput, Store, Unavailable
from opennua.store._actions import encode_actions
from opennua.store._log import Append
from opennua.store._sql import Dialect, Effects, Op, Program, Query
from opennua.store._unit import Unit

from .conftest import FakeClock, action, execution

LONE = "\udc80"  # what a JSON body's "\udc80" decodes to: no UTF-8 spelling


@dataclass(frozen=True, slots=True)
class _WritesThenRaises(Op):
    """A unit op with a bug: it writes, then raises something that is no store error."""

    session_id: str

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        yield Query(
            "UPDATE sessions SET title = 'half-done' WHERE session_id = ?", (self.session_id,)
        )
        raise RuntimeError("a bug in the middle of a unit")


async def test_a_unit_that_raises_midway_fails_alone_and_the_writer_goes_on(
    store: Store,
) -> None:
    for sid in ("ses_a", "ses_b", "ses_c"):
        await store.create_session(sid, created_at=1.0, title="kept")
    bad = Unit(
        None,
        (
            Append("ses_b", encode_actions("ses_b", [action("ses_b", 1)])),
            _WritesThenRaises("ses_b"),
        ),
    )

    async def batched_transaction() -> Any:
        async with store.transaction() as tx:
            tx.append("ses_c", [action("ses_c", 1)])
            tx.update_session_title("ses_c", "renamed")
        return tx.seqs

    # Submitted together, so the SQLite writer runs them in one transaction.
    outcomes = await asyncio.gather(
        store.append("ses_a", [action("ses_a", 1)]),
        store._commit(bad),
        batched_transaction(),
        store.append("ses_a", [action("ses_a", 2)]),
        return_exceptions=True,
    )
    assert outcomes[0] == [1] and outcomes[3] == [2]
    assert outcomes[2] == {"ses_c": [1]}
    error = outcomes[1]
    assert isinstance(error, Unavailable), error
    assert "a bug in the middle of a unit" in str(error)
    # Nothing of the failed unit: no action, the title it wrote is gone.
    assert await store.read("ses_b") == []
    assert (await store.get_session("ses_b")).title == "kept"
    assert (await store.get_session("ses_c")).title == "renamed"
    # And the writer goes on: a write in another session, and the same one again.
    assert await store.append("ses_b", [action("ses_b", 1)]) == [1]
    assert await store.append("ses_a", [action("ses_a", 3)]) == [3]
    assert [a["seq"] for a in await store.read("ses_a")] == [1, 2, 3]


async def test_a_unit_alone_that_raises_midway_leaves_nothing_and_no_open_transaction(
    store: Store,
) -> None:
    await store.create_session("ses_a", created_at=1.0, title="kept")
    bad = Unit(None, (_WritesThenRaises("ses_a"),))
    with pytest.raises(Unavailable):
        await store._commit(bad)
    assert (await store.get_session("ses_a")).title == "kept"
    for n in range(1, 4):  # more writes than one batch
        assert await store.append("ses_a", [action("ses_a", n)]) == [n]
    await store.check_writable()


@dataclass(frozen=True, slots=True)
class _BindsALoneSurrogate(Op):
    """An op that passes the driver a string it cannot encode (past the ops' checks)."""

    session_id: str

    def run(self, d: Dialect, fx: Effects) -> Program[None]:
        yield Query("UPDATE sessions SET title = ? WHERE session_id = ?", ("x", self.session_id))
        yield Query("UPDATE sessions SET title = ? WHERE session_id = ?", (LONE, self.session_id))


async def test_a_string_the_driver_cannot_encode_fails_its_unit_as_invalid_input(
    store: Store,
) -> None:
    await store.create_session("ses_a", created_at=1.0, title="kept")
    outcomes = await asyncio.gather(
        store._commit(Unit(None, (_BindsALoneSurrogate("ses_a"),))),
        store.append("ses_a", [action("ses_a", 1)]),
        return_exceptions=True,
    )
    assert isinstance(outcomes[0], InvalidInput) and "lone surrogate" in str(outcomes[0])
    assert outcomes[1] == [1]
    assert (await store.get_session("ses_a")).title == "kept"
    await store.update_session_title("ses_a", "fine")
    assert (await store.get_session("ses_a")).title == "fine"


def _with_lone_surrogate(sid: str, n: int) -> dict[str, Any]:
    return action(sid, n, message_id="msg_1", delta=f"Hello \ud800 world {n}")


async def test_lone_surrogates_are_refused_and_the_store_keeps_working(
    store: Store, clock: FakeClock
) -> None:
    with pytest.raises(InvalidInput, match=r"session metadata.*lone surrogate"):
        await store.create_session("ses_x", created_at=1.0, metadata={LONE: 1})
    with pytest.raises(InvalidInput, match="title"):
        await store.create_session("ses_x", created_at=1.0, title=f"t{LONE}")
    with pytest.raises(InvalidInput, match="session_id"):
        await store.create_session(f"ses_{LONE}", created_at=1.0)
    await store.create_session("ses_a", created_at=1.0)
    await store.create_session("ses_b", created_at=1.0)
    with pytest.raises(InvalidInput, match="title"):
        await store.update_session_title("ses_a", LONE)
    # A bad action fails its caller alone, even batched with good ones.
    outcomes = await asyncio.gather(
        store.append("ses_a", [action("ses_a", 1)]),
        store.append("ses_b", [action("ses_b", 1), _with_lone_surrogate("ses_b", 2)]),
        store.append("ses_a", [action("ses_a", 2)]),
        store.append("ses_b", [{"id": f"act_{LONE}", "type": "t"}]),
        store.append("ses_b", [{"id": "act_x", "type": f"t{LONE}"}]),
        store.append("ses_b", [{"id": "act_x", "type": "t", "data": {LONE: 1}}]),
        return_exceptions=True,
    )
    assert outcomes[0] == [1] and outcomes[2] == [2]
    for bad in outcomes[1], *outcomes[3:]:
        assert isinstance(bad, InvalidInput), bad
    assert "lone surrogate" in str(outcomes[1]) and "act_ses_b_000002" in str(outcomes[1])
    with pytest.raises(InvalidInput, match="state"):
        await store.put_snapshot("ses_a", 2, f'{{"x": "{LONE}"}}')
    # Idempotency records: the key and the stored response.
    with pytest.raises(InvalidInput):
        await store.begin("scope", f"key{LONE}", "hash", clock.now)
    with pytest.raises(InvalidInput, match="idempotency response"):
        async with store.transaction() as tx:
            tx.claim_idempotency("scope", "key", "hash", clock.now, {"text": LONE})
    # An attempt's journal: a ledger result, a tool call id, the step's actions.
    await store.create_execution(execution("exe_1", "ses_a", clock.now))
    claimed = await store.claim("sup", clock.now, 60.0)
    assert claimed is not None
    with pytest.raises(InvalidInput, match="result"):
        async with store.fenced("exe_1", claimed.epoch) as tx:
            tx.ledger_start("call_1", now=clock.now)
            tx.ledger_complete("call_1", result={"out": LONE}, now=clock.now)
    with pytest.raises(InvalidInput, match="tool_call_id"):
        async with store.fenced("exe_1", claimed.epoch) as tx:
            tx.ledger_start(f"call_{LONE}", now=clock.now)
    with pytest.raises(InvalidInput, match="input"):
        await store.create_execution(
            Execution(
                execution_id="exe_2",
                session_id="ses_a",
                turn_id="trn_2",
                status="queued",
                created_at=clock.now,
                input=[{"type": "text", "text": LONE}],
            )
        )
    # Nothing of it was stored, and everything still works.
    assert [a["seq"] for a in await store.read("ses_a")] == [1, 2]
    assert [a["seq"] for a in await store.read("ses_b")] == []
    assert await store.get_ledger("exe_1") == []
    async with store.fenced("exe_1", claimed.epoch) as tx:
        seqs = tx.append("ses_a", [action("ses_a", 3)])
        tx.ledger_start("call_1", now=clock.now)
        tx.ledger_complete("call_1", result={"out": "fine"}, now=clock.now)
    assert seqs.value == [3]
    async with store.transaction() as tx:
        tx.claim_idempotency("scope", "key", "hash", clock.now, {"text": "fine"})
    await store.update_session_title("ses_a", "fine")
    await store.check_writable()


async def test_a_value_json_cannot_spell_is_invalid_input_not_unavailable(store: Store) -> None:
    with pytest.raises(InvalidInput, match="session metadata cannot be stored as JSON"):
        await store.create_session("ses_a", created_at=1.0, metadata={"when": object()})
    await store.create_session("ses_a", created_at=1.0)
    with pytest.raises(InvalidInput):
        await store.append("ses_a", [{"id": "a1", "type": "t", "data": {"x": {1, 2}}}])
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(InvalidInput):
        await store.append("ses_a", [{"id": "a2", "type": "t", "data": deep}])
    assert await store.append("ses_a", [action("ses_a", 1)]) == [1]
    with pytest.raises(InvalidInput, match="idempotency response"):
        async with store.transaction() as tx:
            tx.claim_idempotency("s", "k", "h", 1.0, object())


async def test_numbers_past_64_bits_read_back_exactly(store: Store) -> None:
    # The store reads bodies with orjson, which would turn these into floats silently.
    values = {
        "big": 2**70,
        "below": -(2**63) - 1,  # 19 digits, past a signed 64-bit integer
        "u64": 2**64 - 1,
        "f": 1e308,
        "digits": "1234567890123456789",
        "text": "é 漢字",
    }
    await store.create_session("ses_n", created_at=1.0)
    await store.append("ses_n", [{"id": "a1", "type": "t", "data": values}])
    (read,) = await store.read("ses_n", 0, 10)
    assert read["data"] == values
    assert all(type(read["data"][k]) is int for k in ("big", "below", "u64"))
