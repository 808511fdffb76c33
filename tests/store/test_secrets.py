"""The secret store on every backend: values sealed at rest, bound to their row, the key
checked at open, rotation all or nothing; and the gateway's audit records."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import stat
import subprocess
from pathlib import Path

import pytest

from opennua.secrets import (
    KEY_ENV,
    SecretError,
    SecretKey,
    SecretKeyError,
    SecretStore,
    load_key,
    open_secret_store,
    rotate_key,
)
from opennua.store import (
    AuditRecord,
    GrantRecord,
    MembershipRecord,
    NotFound,
    PrincipalRecord,
    Store,
)

from .conftest import FakeClock, execution

CANARY = "canary-5f0c1e9a-d3b2-4f7e-9a61-0b8e2c7d4a13"


async def test_put_list_get_delete_never_show_a_value(store: Store, clock: FakeClock) -> None:
    secrets = await SecretStore.open(store, SecretKey.generate(), clock=lambda: clock.now)
    first = await secrets.put("wsp_a", "notes-token", CANARY)
    assert (first.name, first.created_at, first.last_used_at) == ("notes-token", clock.now, None)
    created = clock.now
    clock.advance(5)
    replaced = await secrets.put("wsp_a", "notes-token", CANARY + "-2")
    assert (replaced.created_at, replaced.updated_at) == (created, clock.now)
    await secrets.put("wsp_b", "notes-token", "another workspace's value")

    [info] = await secrets.list("wsp_a")
    assert CANARY not in repr(info) and info.last_used_at is None
    clock.advance(5)
    assert await secrets.get("wsp_a", "notes-token") == CANARY + "-2"
    [info] = await secrets.list("wsp_a")
    assert info.last_used_at == clock.now
    assert await secrets.get("wsp_b", "notes-token") == "another workspace's value"
    assert await secrets.missing("wsp_a", ["notes-token", "gh", "gh"]) == ["gh"]

    assert await secrets.delete("wsp_a", "notes-token")
    assert not await secrets.delete("wsp_a", "notes-token")
    with pytest.raises(SecretError) as gone:
        await secrets.get("wsp_a", "notes-token")
    assert gone.value.code == "secret_not_found"
    for bad in ("", "has space", "x" * 65, "../up"):
        with pytest.raises(SecretError) as invalid:
            await secrets.put("wsp_a", bad, "v")
        assert invalid.value.code == "invalid_secret"
    with pytest.raises(SecretError):
        await secrets.put("wsp_a", "empty", "")


async def test_a_value_is_sealed_and_bound_to_its_workspace_and_name(store: Store) -> None:
    key = SecretKey.generate()
    secrets = await SecretStore.open(store, key)
    await secrets.put("wsp_a", "token", CANARY)
    row = await store.get_secret("wsp_a", "token")
    assert CANARY not in row.sealed and row.key_id == secrets.key_id
    # A sealed value copied to another name, or another workspace, does not open.
    for workspace_id, name in (("wsp_a", "other"), ("wsp_b", "token")):
        await store.put_secret(dataclasses.replace(row, workspace_id=workspace_id, name=name))
        with pytest.raises(SecretKeyError, match="tampered"):
            await secrets.get(workspace_id, name)
    assert await secrets.get("wsp_a", "token") == CANARY


@pytest.mark.on_disk
async def test_the_value_is_nowhere_in_the_database_files(store: Store, store_url: str) -> None:
    secrets = await SecretStore.open(store, SecretKey.generate())
    await secrets.put("wsp_a", "token", CANARY)
    assert await secrets.get("wsp_a", "token") == CANARY
    if store_url.startswith("sqlite:"):
        db = Path(store_url.removeprefix("sqlite:///"))
        for path in db.parent.iterdir():
            if path.is_file():
                assert CANARY.encode() not in path.read_bytes(), path
    else:
        done = await asyncio.to_thread(
            subprocess.run, ["pg_dump", store_url], capture_output=True, check=True
        )
        dump = done.stdout
        assert b"secret_key_check" in dump and CANARY.encode() not in dump


async def test_a_wrong_key_is_refused_at_open(store: Store) -> None:
    right = SecretKey.generate("right")
    await (await SecretStore.open(store, right)).put("wsp_a", "token", CANARY)
    with pytest.raises(SecretKeyError, match="not the key this store"):
        await SecretStore.open(store, SecretKey.generate("NUA_SECRET_KEY"))
    # Even before any secret exists, the first key is what the store was opened with.
    assert await (await SecretStore.open(store, right)).get("wsp_a", "token") == CANARY


async def test_rotation_reseals_everything_and_retires_the_old_key(store: Store) -> None:
    old = SecretKey.generate()
    secrets = await SecretStore.open(store, old)
    for i in range(5):
        await secrets.put(f"wsp_{i % 2}", f"s{i}", f"{CANARY}-{i}")
    stale = await SecretStore.open(store, old)  # another process, still on the old key
    new = SecretKey.generate()
    assert await secrets.rotate_key(new) == 5
    assert await secrets.get("wsp_0", "s4") == f"{CANARY}-4"  # this one moved on
    reopened = await SecretStore.open(store, new)
    assert [await reopened.get(f"wsp_{i % 2}", f"s{i}") for i in range(5)] == [
        f"{CANARY}-{i}" for i in range(5)
    ]
    with pytest.raises(SecretKeyError, match="restart with the new key"):
        await stale.get("wsp_0", "s0")
    with pytest.raises(SecretKeyError, match="not the key"):
        await SecretStore.open(store, old)
    # A second rotation from the retired key changes nothing.
    with pytest.raises(SecretKeyError, match="the key was rotated"):
        await stale.rotate_key(SecretKey.generate())
    assert await reopened.get("wsp_1", "s1") == f"{CANARY}-1"


async def test_the_key_file_is_private_and_rotation_replaces_it(
    store: Store, tmp_path: Path
) -> None:
    data = tmp_path / "keys"
    env: dict[str, str] = {}
    secrets = await open_secret_store(store, data, env)
    mode = stat.S_IMODE(os.stat(data / "secret.key").st_mode)
    assert mode == 0o600
    await secrets.put("wsp_a", "token", CANARY)
    before = (data / "secret.key").read_text()
    count, key = await rotate_key(store, data, env)
    assert count == 1 and (data / "secret.key").read_text().strip() == key.encoded()
    assert before != (data / "secret.key").read_text()
    assert not (data / "secret.key.next").exists()
    assert await (await open_secret_store(store, data, env)).get("wsp_a", "token") == CANARY


async def test_a_rotation_cut_short_before_the_rename_recovers(
    store: Store, tmp_path: Path
) -> None:
    data = tmp_path / "keys"
    secrets = await open_secret_store(store, data, {})
    await secrets.put("wsp_a", "token", CANARY)
    # The store was re-sealed under the next key, the process died before the rename.
    nxt = SecretKey.generate()
    (data / "secret.key.next").write_text(nxt.encoded() + "\n")
    await secrets.rotate_key(nxt)
    recovered = await open_secret_store(store, data, {})
    assert await recovered.get("wsp_a", "token") == CANARY
    assert (data / "secret.key").read_text().strip() == nxt.encoded()


async def test_the_environment_key_wins_and_must_be_well_formed(
    store: Store, tmp_path: Path
) -> None:
    key = SecretKey.generate()
    env = {KEY_ENV: key.encoded()}
    assert load_key(tmp_path, env).raw == key.raw
    assert not (tmp_path / "secret.key").exists()
    with pytest.raises(SecretKeyError, match="32 bytes"):
        load_key(tmp_path, {KEY_ENV: "too-short"})
    secrets = await open_secret_store(store, tmp_path, env)
    await secrets.put("wsp_a", "token", CANARY)
    with pytest.raises(SecretKeyError, match="give the new key"):
        await rotate_key(store, tmp_path, env)
    new = SecretKey.generate()
    assert (await rotate_key(store, tmp_path, env, new))[0] == 1
    moved = {KEY_ENV: new.encoded()}
    assert await (await open_secret_store(store, tmp_path, moved)).get("wsp_a", "token") == CANARY
    assert CANARY not in repr(key) and key.encoded() not in repr(key)


async def test_audit_records_list_newest_first_by_workspace_and_execution(store: Store) -> None:
    records = []
    for i in range(4):
        records.append(
            AuditRecord(
                audit_id=f"aud_{i}",
                at=float(i),
                server="notes",
                tool="lookup",
                outcome="ok" if i % 2 == 0 else "refused",
                code=None if i % 2 == 0 else "egress_denied",
                latency_ms=1.5,
                workspace_id="wsp_a" if i < 3 else "wsp_b",
                principal_id="prn_a",
                execution_id=f"exe_{i % 2}",
                credential="notes-token",
                host="notes.example",
            )
        )
    await store.append_audit(records[:3])
    await store.append_audit(records[2:])  # a record written twice stays one
    assert [a.audit_id for a in await store.list_audit(workspace_id="wsp_a")] == [
        "aud_2",
        "aud_1",
        "aud_0",
    ]
    assert [a.audit_id for a in await store.list_audit(execution_id="exe_1")] == [
        "aud_3",
        "aud_1",
    ]
    [one] = await store.list_audit(workspace_id="wsp_b", limit=1)
    assert (one.credential, one.code, one.host) == ("notes-token", "egress_denied", "notes.example")
    # The console's filters: each narrows, all given must hold, `until` is exclusive.
    refused = await store.list_audit(workspace_id="wsp_b", outcome="refused")
    assert [a.audit_id for a in refused] == ["aud_3"]
    ok = await store.list_audit(outcome="ok", tool="lookup", server="notes")
    assert [a.audit_id for a in ok] == ["aud_2", "aud_0"]
    assert await store.list_audit(principal_id="prn_other") == []
    assert await store.list_audit(server="other-server") == []
    window = await store.list_audit(since=records[1].at, until=records[3].at)
    assert [a.audit_id for a in window] == ["aud_2", "aud_1"]
    # An egress proxy connection is told apart by its byte counts, not by its server name
    # (a plugin may call an MCP server "egress").
    connection = AuditRecord(
        audit_id="aud_9", at=9.0, server="egress", outcome="refused", code="egress_denied",
        latency_ms=0.5, workspace_id="wsp_a", host="10.0.0.1", port=22, bytes_up=0,
        bytes_down=0,
    )  # fmt: skip
    named = AuditRecord(audit_id="aud_8", at=8.0, server="egress", outcome="ok", latency_ms=1)
    await store.append_audit([connection, named])
    [egress] = await store.list_audit(kind="egress")
    assert (egress.kind, egress.port, egress.bytes_up) == ("egress", 22, 0)
    calls = await store.list_audit(kind="tool_call", server="egress")
    assert [(a.audit_id, a.kind) for a in calls] == [("aud_8", "tool_call")]
    assert len(await store.list_audit(kind="tool_call")) == 5


async def test_gateway_facts_read_execution_grant_and_named_secrets_at_once(
    store: Store, clock: FakeClock
) -> None:
    """The gateway's one read per call: the execution, its grant's facts and the sealed
    rows of the secrets named, only those of the grant's workspace that exist."""
    with pytest.raises(NotFound):
        await store.gateway_facts("exe_none", ["a"])
    await store.create_session("ses_a", created_at=clock.now)
    await store.create_execution(execution("exe_1", "ses_a", clock.now))
    # No grant: the execution, and no secrets even where the names exist.
    secrets = await SecretStore.open(store, SecretKey.generate())
    for workspace_id, name in (("wsp_a", "a"), ("wsp_a", "b"), ("wsp_b", "c"), ("wsp_a", "z")):
        await secrets.put(workspace_id, name, f"{workspace_id}-{name}")
    bare = await store.gateway_facts("exe_1", ["a"])
    assert bare.execution.execution_id == "exe_1" and bare.grant is None and bare.secrets == {}
    await store.create_principal(
        PrincipalRecord(principal_id="prn_a", kind="user", name="alice", created_at=1.0),
        memberships=[MembershipRecord(workspace_id="wsp_a", principal_id="prn_a",
                                      role="member", created_at=1.0)],
    )  # fmt: skip
    await store.put_grant(
        GrantRecord(execution_id="exe_1", principal_id="prn_a", workspace_id="wsp_a",
                    expires_at=100.0)
    )  # fmt: skip
    facts = await store.gateway_facts("exe_1", ["a", "b", "c", "missing"])
    assert facts.execution == await store.get_execution("exe_1")
    assert facts.grant == await store.grant_facts("exe_1")
    # `c` is another workspace's, `missing` none's, `z` not asked for.
    assert facts.secrets == {n: await store.get_secret("wsp_a", n) for n in ("a", "b")}
    assert (await store.gateway_facts("exe_1")).secrets == {}
    [only] = (await store.gateway_facts("exe_1", ["b"])).secrets.values()
    assert await secrets.unseal(only) == "wsp_a-b"
