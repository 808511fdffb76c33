"""The plugin registry: immutable versions, channel moves with their history, deployments."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from opennua.store import (
    DeploymentRecord,
    InvalidInput,
    NotFound,
    PluginFile,
    PluginVersion,
    QuotaExceeded,
    Store,
    WorkspaceRecord,
    WriteConflict,
)


async def version(
    store: Store, v: str, *contents: bytes, digest: str | None = None
) -> PluginVersion:
    files = []
    for n, data in enumerate(contents or (b"instructions " + v.encode(),)):
        ref = await store.blobs.put(data)
        files.append(PluginFile(path=f"file{n}.md", sha256=ref.sha256, size=ref.size))
    return PluginVersion(
        name="helper",
        version=v,
        digest=digest or f"d{v}".ljust(64, "0"),
        description="a helper",
        files=tuple(files),
        published_at=float(len(v)),
    )


async def test_a_published_version_reads_back_whole(store: Store) -> None:
    v1 = await version(store, "1.0.0", b"a", b"b")
    assert await store.publish_plugin(v1) == (v1, True)
    assert await store.get_plugin_version("helper", "1.0.0") == v1
    assert await store.list_plugin_versions("helper") == [v1]
    assert await store.list_plugins() == ["helper"]


async def test_republishing_is_idempotent_and_another_digest_is_refused(store: Store) -> None:
    v1 = await version(store, "1.0.0")
    await store.publish_plugin(v1)
    assert await store.publish_plugin(v1) == (v1, False)
    with pytest.raises(WriteConflict, match="already published") as info:
        await store.publish_plugin(await version(store, "1.0.0", b"other", digest="e" * 64))
    assert info.value.key == "helper@1.0.0"
    assert await store.get_plugin_version("helper", "1.0.0") == v1


async def test_a_version_whose_files_are_not_uploaded_is_not_registered(store: Store) -> None:
    missing = PluginVersion(
        name="helper",
        version="1.0.0",
        digest="f" * 64,
        files=(PluginFile(path="a", sha256="0" * 64, size=1),),
    )
    with pytest.raises(InvalidInput, match="was not uploaded"):
        await store.publish_plugin(missing)
    with pytest.raises(NotFound):
        await store.list_plugin_versions("helper")


async def test_release_and_rollback_move_the_channel_and_keep_every_move(store: Store) -> None:
    for v in ("1.0.0", "2.0.0", "3.0.0"):
        await store.publish_plugin(await version(store, v))
    with pytest.raises(NotFound):
        await store.resolve_channel("helper", "stable")
    with pytest.raises(WriteConflict, match="no earlier release"):
        await store.rollback_plugin("helper", "stable", 1.0)
    await store.release_plugin("helper", "stable", "1.0.0", 1.0)
    await store.release_plugin("helper", "stable", "2.0.0", 2.0)
    await store.release_plugin("helper", "stable", "3.0.0", 3.0)
    await store.release_plugin("helper", "beta", "3.0.0", 3.5)
    assert (await store.rollback_plugin("helper", "stable", 4.0)).version == "2.0.0"
    # A second rollback goes further back, not back to the version just left.
    assert (await store.rollback_plugin("helper", "stable", 5.0)).version == "1.0.0"
    assert await store.resolve_channel("helper", "stable") == "1.0.0"
    assert await store.resolve_channel("helper", "beta") == "3.0.0"
    history = await store.channel_history("helper", "stable")
    assert [(m.seq, m.kind, m.version) for m in history] == [
        (1, "release", "1.0.0"),
        (2, "release", "2.0.0"),
        (3, "release", "3.0.0"),
        (4, "rollback", "2.0.0"),
        (5, "rollback", "1.0.0"),
    ]
    assert len(await store.channel_history("helper")) == 6


async def test_releasing_an_unpublished_version_moves_nothing(store: Store) -> None:
    await store.publish_plugin(await version(store, "1.0.0"))
    with pytest.raises(NotFound):
        await store.release_plugin("helper", "stable", "9.9.9", 1.0)
    assert await store.channel_history("helper") == []


async def test_a_deployment_keeps_every_configuration_by_digest(store: Store) -> None:
    first = DeploymentRecord(name="support", digest="a" * 64, spec={"model": "m1"}, created_at=1.0)
    second = DeploymentRecord(name="support", digest="b" * 64, spec={"model": "m2"}, created_at=2.0)
    assert await store.put_deployment(first) == first
    assert await store.put_deployment(second) == second
    assert await store.get_deployment("support") == second
    assert await store.get_deployment_config("a" * 64) == first
    assert await store.list_deployments() == [second]
    with pytest.raises(NotFound):
        await store.get_deployment("nope")


async def test_a_plugin_name_and_a_deployment_name_belong_to_where_they_were_first_used(
    store: Store,
) -> None:
    mine = dataclasses.replace(
        await version(store, "1.0.0"),
        workspace_id="wsp_a", publisher_id="prn_1", visibility="private",
    )  # fmt: skip
    await store.publish_plugin(mine)
    assert await store.get_plugin_version("helper", "1.0.0") == mine
    # Another workspace, another publisher of a private plugin, another visibility: taken.
    for other in (
        {"workspace_id": "wsp_b"},
        {"publisher_id": "prn_2"},
        {"visibility": "workspace"},
    ):
        taken = dataclasses.replace(await version(store, "2.0.0"), **{**_owner(mine), **other})
        with pytest.raises(WriteConflict, match="is taken"):
            await store.publish_plugin(taken)
    same = dataclasses.replace(await version(store, "2.0.0"), **_owner(mine))
    assert (await store.publish_plugin(same))[1] is True

    dep = DeploymentRecord(
        name="support", digest="sha256:1", spec={"plugin": "helper"}, created_at=1.0,
        workspace_id="wsp_a",
    )  # fmt: skip
    assert await store.put_deployment(dep) == dep
    with pytest.raises(WriteConflict, match="taken by another workspace"):
        await store.put_deployment(
            dataclasses.replace(dep, digest="sha256:2", workspace_id="wsp_b")
        )
    assert (await store.get_deployment("support")).workspace_id == "wsp_a"
    assert (await store.get_deployment_config("sha256:1")).workspace_id == "wsp_a"


def _owner(v: PluginVersion) -> dict[str, object]:
    return {
        "workspace_id": v.workspace_id,
        "publisher_id": v.publisher_id,
        "visibility": v.visibility,
    }


async def test_a_workspace_holds_the_blobs_it_uploaded_within_its_quota(store: Store) -> None:
    a = await store.blobs.put(b"a" * 60)
    b = await store.blobs.put(b"b" * 50)
    assert await store.hold_blob("wsp_a", a.sha256, a.size, 1.0, quota=100) is True
    # Holding it again is free, also at the quota; each distinct blob counts once.
    assert await store.hold_blob("wsp_a", a.sha256, a.size, 2.0, quota=60) is False
    with pytest.raises(QuotaExceeded) as over:
        await store.hold_blob("wsp_a", b.sha256, b.size, 3.0, quota=100)
    assert (over.value.used, over.value.quota, over.value.size) == (60, 100, 50)
    assert await store.held_blobs("wsp_a", [a.sha256, b.sha256]) == {a.sha256: 60}
    assert await store.workspace_usage("wsp_a") == 60
    # Another workspace holds nothing of A's until it uploads it itself.
    assert await store.held_blobs("wsp_b", [a.sha256]) == {}
    assert await store.hold_blob("wsp_b", b.sha256, b.size, 4.0) is True
    assert await store.workspace_usage("wsp_b") == 50
    assert await store.all_held_blobs() == {a.sha256, b.sha256}


async def test_a_workspaces_versions_are_its_own_and_the_server_wide_ones(store: Store) -> None:
    ours = dataclasses.replace(await version(store, "1.0.0"), workspace_id="wsp_a")
    server = dataclasses.replace(await version(store, "1.0.0", b"s"), name="builtin")
    theirs = dataclasses.replace(
        await version(store, "1.0.0", b"t"), name="theirs", workspace_id="wsp_b"
    )
    for v in (ours, server, theirs):
        await store.publish_plugin(v)
    assert [v.name for v in await store.workspace_versions("wsp_a")] == ["builtin", "helper"]


async def test_two_uploads_at_once_cannot_both_fit_the_quota(store: Store) -> None:
    # On PostgreSQL each hold runs on its own connection: the workspace row's lock makes
    # them take turns, so the second sees the first's bytes.
    for n in range(5):
        workspace = await store.create_workspace(
            WorkspaceRecord(workspace_id=f"wsp_race{n}", name=f"race{n}", created_at=0.0)
        )
        refs = [await store.blobs.put(f"{n}:{side}".encode() * 20) for side in "ab"]
        results = await asyncio.gather(
            *(
                store.hold_blob(workspace.workspace_id, r.sha256, r.size, 1.0, quota=r.size + 5)
                for r in refs
            ),
            return_exceptions=True,
        )
        assert sorted(type(r).__name__ for r in results) == ["QuotaExceeded", "bool"], results
        assert await store.workspace_usage(workspace.workspace_id) == refs[0].size
