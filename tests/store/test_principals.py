"""The store's facts about who may do what, on both backends: workspaces, principals,
memberships, tokens, grants, and the Authority that decides with them."""

from __future__ import annotations

import pytest

from opennua.auth import Authority, Denied
from opennua.store import (
    GrantRecord,
    InputRequestRecord,
    MembershipRecord,
    NotFound,
    PrincipalRecord,
    SessionRecord,
    Store,
    TokenRecord,
    WorkspaceRecord,
    WriteConflict,
)

from .conftest import FakeClock, execution


async def test_names_are_unique_and_memberships_upsert(store: Store) -> None:
    await store.create_workspace(WorkspaceRecord(workspace_id="wsp_a", name="a", created_at=1.0))
    with pytest.raises(WriteConflict):
        await store.create_workspace(
            WorkspaceRecord(workspace_id="wsp_b", name="a", created_at=2.0)
        )
    alice = PrincipalRecord(principal_id="prn_a", kind="user", name="alice", created_at=1.0)
    member = MembershipRecord(
        workspace_id="wsp_a", principal_id="prn_a", role="viewer", created_at=1.0
    )
    await store.create_principal(alice, memberships=[member])
    with pytest.raises(WriteConflict):
        await store.create_principal(
            PrincipalRecord(principal_id="prn_b", kind="user", name="alice", created_at=2.0)
        )
    await store.set_membership(
        MembershipRecord(workspace_id="wsp_a", principal_id="prn_a", role="admin", created_at=3.0)
    )
    [m] = await store.list_memberships(principal_id="prn_a")
    assert m.role == "admin"
    assert await store.remove_membership("wsp_a", "prn_a")
    assert not await store.remove_membership("wsp_a", "prn_a")


async def test_a_grant_renews_forward_only_and_stays_revoked(store: Store) -> None:
    grant = GrantRecord(
        execution_id="exe_1", principal_id="prn_a", workspace_id="wsp_a", expires_at=100.0
    )
    await store.put_grant(grant)
    assert await store.renew_grant("exe_1", 200.0)
    assert await store.renew_grant("exe_1", 150.0)  # holds, but never moves back
    got = await store.get_grant("exe_1")
    assert got is not None and got.expires_at == 200.0
    await store.revoke_grant("exe_1", 120.0, "token_revoked")
    assert not await store.renew_grant("exe_1", 300.0)
    got = await store.get_grant("exe_1")
    assert got is not None and (got.revoked_at, got.revoked_reason) == (120.0, "token_revoked")


async def test_tokens_by_hash_expiry_revocation_and_bootstrap(
    store: Store, clock: FakeClock
) -> None:
    authority = Authority(store, clock=lambda: clock.now)
    default = await authority.bootstrap("the-old-owner-token")
    again = await authority.bootstrap("another-token")  # a second start changes nothing
    assert again.workspace_id == default.workspace_id
    owner = await authority.authenticate("the-old-owner-token")
    assert owner.role_in(default.workspace_id) == "owner"
    with pytest.raises(Denied) as wrong:
        await authority.authenticate("another-token")
    assert wrong.value.code == "unauthorized"

    record, token = await authority.create_token(owner, expires_in=60)
    assert token.startswith(f"nua.{record.token_id}.") and record.secret_hash not in token
    assert (await authority.authenticate(token)).principal_id == owner.principal_id
    with pytest.raises(Denied) as forged:
        await authority.authenticate(token[:-1] + ("A" if token[-1] != "A" else "B"))
    assert forged.value.code == "unauthorized"
    clock.advance(61)
    with pytest.raises(Denied) as expired:
        await authority.authenticate(token)
    assert expired.value.code == "token_expired"
    _, other = await authority.create_token(owner)
    revoked = await authority.revoke_token(owner, other.split(".")[1])
    assert revoked.revoked_at is not None
    with pytest.raises(Denied) as gone:
        await authority.authenticate(other)
    assert gone.value.code == "token_revoked"


async def test_an_agent_principal_inherits_nothing_from_its_creator(store: Store) -> None:
    authority = Authority(store)
    await authority.bootstrap("owner-token")
    owner = await authority.authenticate("owner-token")
    team = await authority.create_workspace(owner, "team")
    default = next(w for w in owner.roles)
    agent = await authority.create_agent(owner, default, "bot", "viewer")
    _, token = await authority.create_token(owner, principal_id=agent.principal_id)
    bot = await authority.authenticate(token)
    assert bot.kind == "agent" and bot.roles == {default: "viewer"}
    assert bot.role_in(team.workspace_id) is None
    with pytest.raises(Denied):
        authority.check(bot, default, "act")
    with pytest.raises(Denied) as hidden:
        authority.check(bot, team.workspace_id, "read")
    assert hidden.value.code == "not_found"
    await authority.disable_agent(owner, agent.principal_id)
    with pytest.raises(Denied) as disabled:
        await authority.authenticate(token)
    assert disabled.value.code == "principal_disabled"


async def test_grant_facts_read_the_grant_with_what_it_is_checked_against(
    store: Store,
) -> None:
    assert await store.grant_facts("exe_none") is None
    await store.create_principal(
        PrincipalRecord(principal_id="prn_a", kind="user", name="alice", created_at=1.0),
        memberships=[
            MembershipRecord(
                workspace_id="wsp_a", principal_id="prn_a", role="member", created_at=1.0
            )
        ],
    )
    await store.put_grant(
        GrantRecord(
            execution_id="exe_1",
            principal_id="prn_a",
            workspace_id="wsp_a",
            token_id="tok_missing",
            expires_at=100.0,
        )
    )
    facts = await store.grant_facts("exe_1")
    assert facts is not None
    grant, principal, role, token = facts
    assert grant.execution_id == "exe_1" and principal is not None and principal.name == "alice"
    assert role == "member" and token is None  # a token that is gone reads as none


async def test_answer_facts_read_request_execution_and_grant_facts_as_they_are_now(
    store: Store, clock: FakeClock
) -> None:
    """One read for an answer: what it reads is the current state of every fact, so a
    revocation (by any process) counts for the very next answer."""
    with pytest.raises(NotFound):
        await store.answer_facts("req_none")
    await store.create_session("ses_a", created_at=clock.now)
    await store.create_execution(execution("exe_1", "ses_a", clock.now))
    claimed = await store.claim("sup", clock.now, 30.0)
    assert claimed is not None
    async with store.fenced("exe_1", claimed.epoch) as tx:
        tx.open_input_request(
            InputRequestRecord(
                request_id="req_1",
                session_id="ses_a",
                execution_id="exe_1",
                turn_id="trn_exe_1",
                status="open",
                payload={"prompt": "May I?"},
                created_at=clock.now,
            )
        )
        tx.park_for_input()
    before = await store.answer_facts("req_1")
    assert before.request == await store.get_input_request("req_1")
    assert before.execution == await store.get_execution("exe_1")
    assert before.execution.status == "waiting_input"
    assert before.grant is None  # accepted before grants existed

    await store.create_principal(
        PrincipalRecord(principal_id="prn_a", kind="user", name="alice", created_at=1.0),
        memberships=[
            MembershipRecord(
                workspace_id="wsp_a", principal_id="prn_a", role="member", created_at=1.0
            )
        ],
    )
    await store.create_token(
        TokenRecord(
            token_id="tok_a", principal_id="prn_a", secret_hash="h", name=None, created_at=1.0
        )
    )
    await store.put_grant(
        GrantRecord(
            execution_id="exe_1",
            principal_id="prn_a",
            workspace_id="wsp_a",
            token_id="tok_a",
            expires_at=100.0,
        )
    )
    facts = await store.answer_facts("req_1")
    assert facts.grant == await store.grant_facts("exe_1")
    assert facts.grant is not None
    grant, principal, role, token = facts.grant
    assert grant.token_id == "tok_a" and role == "member"
    assert principal is not None and principal.disabled_at is None
    assert token is not None and token.revoked_at is None

    await store.revoke_token("tok_a", 5.0)
    await store.remove_membership("wsp_a", "prn_a")
    await store.disable_principal("prn_a", 6.0)
    await store.revoke_grant("exe_1", 7.0, "token_revoked")
    after = await store.answer_facts("req_1")
    assert after.grant == await store.grant_facts("exe_1")
    assert after.grant is not None
    grant, principal, role, token = after.grant
    assert grant.revoked_at == 7.0 and grant.revoked_reason == "token_revoked"
    assert principal is not None and principal.disabled_at == 6.0
    assert role is None and token is not None and token.revoked_at == 5.0


async def test_where_an_object_lives_is_read_once_and_an_orphan_until_it_is_adopted(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    authority = Authority(store, cache_seconds=0)  # nothing else is cached
    await store.create_session("ses_old", created_at=1.0)  # from before workspaces
    assert await authority.session_workspace("ses_old") is None
    default = await authority.bootstrap("owner-token")  # adopts it
    reads: list[str] = []
    get_session = store.get_session

    async def counted(session_id: str) -> SessionRecord:
        reads.append(session_id)
        return await get_session(session_id)

    monkeypatch.setattr(store, "get_session", counted)
    for _ in range(3):
        assert await authority.session_workspace("ses_old") == default.workspace_id
    # A session never moves to another workspace: one read serves for as long as it lives.
    assert reads == ["ses_old"]
    with pytest.raises(NotFound):
        await authority.session_workspace("ses_missing")
    with pytest.raises(NotFound):
        await authority.session_workspace("ses_missing")
    assert reads == ["ses_old", "ses_missing", "ses_missing"]
