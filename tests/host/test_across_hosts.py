"""Guarantees that must hold across Host processes on one store, not just inside one:
each Host here has its own store connection, as two `nua serve --role host` would."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from opennua.auth import Authority
from opennua.host import Actor, Hub, SessionHost
from opennua.protocol import Accepted, AnswerInput, CreateSession, Rejected, SendMessage
from opennua.protocol.actions import TextPart
from opennua.store import Store, open_store
from opennua.store._inputs import ResolveInput
from opennua.store._unit import Unit
from tests.server._harness import Env, FakeClock, park_for_input

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/nua.db"
    pg: str = request.getfixturevalue("pg_url")
    return pg


@contextlib.asynccontextmanager
async def _host(url: str, data_dir: Path, clock: FakeClock) -> AsyncIterator[Env]:
    """One Host "process": its own store connection, hub and (random) ids."""
    store = await open_store(url, data_dir=data_dir)
    try:
        hub = Hub(store)
        host = SessionHost(store, hub, clock=clock)
        await host.registry.ensure_builtin("scripted:demo")
        yield Env(store, hub, host, clock, None, None)  # type: ignore[arg-type]
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def _two_hosts(url: str, tmp_path: Path) -> AsyncIterator[tuple[Env, Env]]:
    clock = FakeClock()
    async with (
        _host(url, tmp_path / "data", clock) as a,
        _host(url, tmp_path / "data", clock) as b,
    ):
        yield a, b


def _msg(key: str, if_busy: Any = "reject") -> SendMessage:
    return SendMessage(
        intent_id=key, client_id="cli_a", content=[TextPart(text="hi")], if_busy=if_busy
    )


async def _session(host: SessionHost) -> str:
    result = await host.submit(None, CreateSession(intent_id="int_s", client_id="c", title="t"))
    assert isinstance(result, Accepted)
    return result.ids["session_id"]


async def test_reject_messages_racing_on_two_hosts_start_one_turn(url: str, tmp_path: Path) -> None:
    async with _two_hosts(url, tmp_path) as (a, b):
        sid = await _session(a.host)
        # Both hosts read "idle" before either commits: the interleaving an in-process
        # lock cannot prevent. Only a busy check inside the committing unit can.
        both_read = asyncio.Barrier(2)
        for env in (a, b):
            real = env.host._active

            async def active(session_id: str, real: Any = real) -> Any:
                found = await real(session_id)
                await both_read.wait()
                return found

            env.host._active = active  # type: ignore[method-assign]
        results = await asyncio.gather(
            a.host.submit(sid, _msg("int_a")), b.host.submit(sid, _msg("int_b"))
        )
        assert sorted(r.type for r in results) == ["accepted", "rejected"], results
        rejected = next(r for r in results if r.type == "rejected")
        assert rejected.code == "session_busy"  # type: ignore[union-attr]
        assert len(await a.store.list_executions(sid)) == 1
        assert len([x for x in await a.store.read(sid) if x["type"] == "turn.started"]) == 1


async def test_many_reject_messages_on_two_hosts_start_one_turn(url: str, tmp_path: Path) -> None:
    async with _two_hosts(url, tmp_path) as (a, b):
        sid = await _session(a.host)
        results = await asyncio.gather(
            *((a, b)[i % 2].host.submit(sid, _msg(f"int_{i}")) for i in range(20))
        )
        assert sorted(r.type for r in results) == ["accepted"] + ["rejected"] * 19
        assert len(await b.store.list_executions(sid)) == 1


class _Crash(BaseException):
    """The process dies here: nothing after this point runs."""


async def test_a_crash_right_after_the_winning_answer_leaves_its_key_completed(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = [{"option_id": "ok", "name": "OK", "kind": "allow_once"}]
    async with _two_hosts(url, tmp_path) as (dying, restarted):
        sid = await _session(dying.host)
        turn = await dying.host.submit(sid, _msg("int_m", "enqueue"))
        assert isinstance(turn, Accepted)
        eid, tid = turn.ids["execution_id"], turn.ids["turn_id"]
        rid = await park_for_input(dying, sid, eid, tid, options=options)

        store: Store = dying.store
        commit = store._commit

        async def resolve_then_die(unit: Unit) -> Any:
            results = await commit(unit)
            if any(isinstance(op, ResolveInput) for op in unit.ops):
                raise _Crash
            return results

        monkeypatch.setattr(store, "_commit", resolve_then_die)
        answer = AnswerInput(intent_id="int_a", client_id="cli_a", request_id=rid, option_id="ok")
        with pytest.raises(_Crash):
            await dying.host.submit(sid, answer)

        # The client retransmits to another (or the restarted) host: it gets the stored
        # acceptance at once, not "still in flight" until the key expires a day later.
        again = await restarted.host.submit(sid, answer)
        assert isinstance(again, Accepted), again
        assert again.ids == {"request_id": rid, "execution_id": eid}
        assert (await restarted.store.get_input_request(rid)).status == "resolved"
        resolved = [x for x in await restarted.store.read(sid) if x["type"].endswith("resolved")]
        assert len(resolved) == 1


@pytest.mark.parametrize("change", ["token_revoked", "membership_removed"])
async def test_a_revocation_on_another_host_refuses_the_very_next_answer(
    url: str, tmp_path: Path, change: str
) -> None:
    """Host A accepts answers; another process (its own store connection and Authority,
    nothing shared in memory) revokes the token the turn was started with, or removes its
    principal from the workspace. The next answer A takes is refused: the grant's facts are
    read with the answer, never from a cache."""
    options = [{"option_id": "ok", "name": "OK", "kind": "allow_once"}]
    clock = FakeClock()
    async with (
        await open_store(url, data_dir=tmp_path / "data") as store_a,
        await open_store(url, data_dir=tmp_path / "data") as store_b,
    ):
        a, b = Authority(store_a), Authority(store_b)
        await a.bootstrap("owner-token")
        owner = await a.authenticate("owner-token")
        workspace = owner.default_workspace
        assert workspace is not None
        bob, bob_token = await a.create_user(owner, "bob")
        await a.set_member(owner, workspace, bob.principal_id, "member")
        bob_caller = await a.authenticate(bob_token)  # A's caches are warm
        host = SessionHost(store_a, Hub(store_a), clock=clock, grant_check=a.grant_problem)
        await host.registry.ensure_builtin("scripted:demo")
        actor = Actor(bob.principal_id, workspace, a.grant_for(bob_caller, workspace, model=None))
        created = await host.submit(
            None, CreateSession(intent_id="int_s", client_id="c", title="t"), actor=actor
        )
        assert isinstance(created, Accepted)
        sid = created.ids["session_id"]
        turn = await host.submit(sid, _msg("int_m"), actor=actor)
        assert isinstance(turn, Accepted)
        eid, tid = turn.ids["execution_id"], turn.ids["turn_id"]
        env = Env(store_a, host.hub, host, clock, None, a)  # type: ignore[arg-type]
        rid = await park_for_input(env, sid, eid, tid, options=options)
        assert await a.grant_problem(eid) is None

        if change == "token_revoked":
            await b.revoke_token(await b.authenticate(bob_token), bob_caller.token_id)
        else:
            await b.remove_member(await b.authenticate("owner-token"), workspace, bob.principal_id)

        answer = AnswerInput(intent_id="int_a", client_id="cli_a", request_id=rid, option_id="ok")
        refused = await host.submit(sid, answer, actor=Actor(owner.principal_id, workspace))
        assert isinstance(refused, Rejected), refused
        assert refused.code == "grant_revoked" and change in refused.message
        assert (await store_a.get_execution(eid)).status == "revoked"
        assert (await store_a.get_input_request(rid)).status != "open"
