"""The store's facts about people (issue 29), on every backend: server admins, tokens
revoked for one workspace, agent-principal names per workspace, and the wake-ups that tell
every process a principal may have lost rights."""

from __future__ import annotations

import asyncio

import pytest

from opennua.store import (
    GrantRecord,
    MembershipRecord,
    NotFound,
    PrincipalRecord,
    Store,
    TokenRecord,
    Watcher,
    WriteConflict,
)

from .conftest import FakeClock, execution


def _user(principal_id: str, name: str) -> PrincipalRecord:
    return PrincipalRecord(principal_id=principal_id, kind="user", name=name, created_at=1.0)


def _member(workspace_id: str, principal_id: str, role: str = "member") -> MembershipRecord:
    return MembershipRecord(
        workspace_id=workspace_id,
        principal_id=principal_id,
        role=role,  # type: ignore[arg-type]
        created_at=1.0,
    )


async def _woken(watcher: Watcher) -> set[str]:
    """The principals woken so far (waiting a little: PostgreSQL's come by NOTIFY)."""
    taken = await asyncio.wait_for(watcher.batch(100), 5)
    await asyncio.sleep(0.05)
    if watcher._pending:  # the rest of a burst
        taken += await watcher.batch(100)
    return {principal_id for principal_id, _ in taken}


async def test_every_change_that_may_take_rights_away_wakes_the_watchers(store: Store) -> None:
    await store.create_principal(_user("prn_a", "alice"), memberships=[_member("wsp_a", "prn_a")])
    await store.create_principal(_user("prn_b", "bob"))
    await store.create_token(
        TokenRecord(token_id="tok_a", principal_id="prn_a", secret_hash="h", created_at=1.0)
    )
    await store.create_token(
        TokenRecord(token_id="tok_b", principal_id="prn_b", secret_hash="h", created_at=1.0)
    )
    async with store.watch_rights() as watcher:
        await store.revoke_token("tok_a", 2.0)
        assert await _woken(watcher) == {"prn_a"}
        await store.revoke_token_in("tok_b", "wsp_a", 2.0, revoked_by="prn_a")
        assert await _woken(watcher) == {"prn_b"}
        await store.set_membership(_member("wsp_a", "prn_a", "viewer"))
        assert await _woken(watcher) == {"prn_a"}
        assert await store.remove_membership("wsp_a", "prn_a")
        assert await _woken(watcher) == {"prn_a"}
        await store.disable_principal("prn_b", 3.0)
        assert await _woken(watcher) == {"prn_b"}
        await store.set_server_admin("prn_a", 4.0)
        await store.set_server_admin("prn_b", 4.0)
        await store.set_server_admin("prn_b", None)
        assert await _woken(watcher) == {"prn_a", "prn_b"}
        # Nothing that was not a change wakes anybody: an unknown token, no membership.
        with pytest.raises(NotFound):
            await store.revoke_token("tok_none", 5.0)
        assert not await store.remove_membership("wsp_a", "prn_a")
        await asyncio.sleep(0.1)
        assert not watcher._pending


async def test_a_token_revoked_for_one_workspace_breaks_grants_there_only(store: Store) -> None:
    await store.create_principal(
        _user("prn_a", "alice"), memberships=[_member("wsp_a", "prn_a"), _member("wsp_b", "prn_a")]
    )
    await store.create_token(
        TokenRecord(token_id="tok_a", principal_id="prn_a", secret_hash="h", created_at=1.0)
    )
    for execution_id, workspace_id in (("exe_a", "wsp_a"), ("exe_b", "wsp_b")):
        await store.put_grant(
            GrantRecord(
                execution_id=execution_id,
                principal_id="prn_a",
                workspace_id=workspace_id,
                token_id="tok_a",
                expires_at=100.0,
            )
        )
    await store.revoke_token_in("tok_a", "wsp_a", 7.0, revoked_by="prn_owner")
    await store.revoke_token_in("tok_a", "wsp_a", 9.0)  # again: the first one stands
    assert [(t.token_id, at) for t, at in await store.workspace_tokens("wsp_a")] == [("tok_a", 7.0)]
    assert [(t.token_id, at) for t, at in await store.workspace_tokens("wsp_b")] == [
        ("tok_a", None)
    ]
    opened = await store.list_memberships(principal_id="prn_a", opened_by="tok_a")
    assert [m.workspace_id for m in opened] == ["wsp_b"]
    here, there = await store.grant_facts("exe_a"), await store.grant_facts("exe_b")
    assert here is not None and there is not None
    assert here[3] is not None and here[3].revoked_at == 7.0
    assert there[3] is not None and there[3].revoked_at is None
    assert (await store.get_token("tok_a")).revoked_at is None  # elsewhere it still opens
    with pytest.raises(NotFound):
        await store.revoke_token_in("tok_none", "wsp_a", 7.0)


async def test_the_last_server_admin_stays_one(store: Store) -> None:
    await store.create_principal(_user("prn_a", "alice"))
    await store.create_principal(_user("prn_b", "bob"))
    await store.create_principal(
        PrincipalRecord(
            principal_id="prn_bot", kind="agent", name="bot", workspace_id="wsp_a", created_at=1.0
        )
    )
    await store.set_server_admin("prn_a", 10.0)
    await store.set_server_admin("prn_a", 20.0)  # already one: since stays
    assert (await store.get_principal("prn_a")).admin_since == 10.0
    with pytest.raises(WriteConflict):
        await store.set_server_admin("prn_a", None)
    with pytest.raises(NotFound):
        await store.set_server_admin("prn_bot", 10.0)  # an agent principal is no person
    await store.set_server_admin("prn_b", 11.0)
    await store.set_server_admin("prn_a", None)
    assert (await store.get_principal("prn_a")).admin_since is None
    assert (await store.get_principal("prn_b")).admin_since == 11.0


async def test_agent_names_belong_to_their_workspace_and_user_names_to_the_server(
    store: Store,
) -> None:
    def agent(principal_id: str, workspace_id: str) -> PrincipalRecord:
        return PrincipalRecord(
            principal_id=principal_id,
            kind="agent",
            name="bot",
            workspace_id=workspace_id,
            created_at=1.0,
        )

    await store.create_principal(agent("prn_1", "wsp_a"))
    await store.create_principal(agent("prn_2", "wsp_b"))  # no oracle across workspaces
    with pytest.raises(WriteConflict):
        await store.create_principal(agent("prn_3", "wsp_a"))
    await store.create_principal(_user("prn_u", "bot"))  # a person may be called that too
    with pytest.raises(WriteConflict):
        await store.create_principal(_user("prn_v", "bot"))


async def test_unowned_executions_with_grants_are_found_by_principal(
    store: Store, clock: FakeClock
) -> None:
    await store.create_session("ses_a", created_at=clock.now)
    for execution_id in ("exe_1", "exe_2", "exe_3"):
        await store.create_execution(execution(execution_id, "ses_a", clock.now))
        await store.put_grant(
            GrantRecord(
                execution_id=execution_id,
                principal_id="prn_b" if execution_id == "exe_3" else "prn_a",
                workspace_id="wsp_a",
                expires_at=100.0,
            )
        )
    claimed = await store.claim("sup", clock.now, 30.0)  # exe_1 runs: not unowned
    assert claimed is not None and claimed.execution.execution_id == "exe_1"
    found = await store.unowned_with_grants(["prn_a"])
    assert [e.execution_id for e, _ in found] == ["exe_2"]
    assert found[0][1] is not None and found[0][1][0].principal_id == "prn_a"
    await store.revoke_grant("exe_2", 5.0, "token_revoked")  # already judged
    assert await store.unowned_with_grants(["prn_a"]) == []
    assert [e.execution_id for e, _ in await store.unowned_with_grants(["prn_a", "prn_b"])] == [
        "exe_3"
    ]
    assert await store.unowned_with_grants([]) == []
