"""What a publish and an upload may cost (issue 29, Medium 6): the listing's count and
sizes are checked before a byte is read or written; uploads count as they arrive; each
workspace holds at most its quota of uploaded plugin files."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable

import pytest
from typer.testing import CliRunner

from opennua.cli import app
from opennua.cli._serve import parse_size
from opennua.plugins import MAX_FILE_BYTES
from tests._support.plugins import OCTETS, listing, plugin_files, problem, upload

from ._harness import AUTH, Env
from ._world import unique


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _count_reads(env: Env, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    read: Callable[[str], Awaitable[bytes]] = env.store.blobs.read

    async def counted(sha256: str) -> bytes:
        reads.append(sha256)
        return await read(sha256)

    monkeypatch.setattr(env.store.blobs, "read", counted)
    return reads


async def test_a_small_listing_of_one_big_blob_many_times_is_refused_before_any_read(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's case: a 3.4 KB listing naming one 10 MiB blob 30 times made the server
    write 300 MiB before it answered 422."""
    async with env.client(headers=AUTH) as c:
        files = plugin_files("1.0.0")
        await upload(c, files)
        big = bytes(MAX_FILE_BYTES)
        put = await c.post("/v1/plugin-files", content=big, headers=OCTETS)
        assert put.status_code == 201, put.text
        entry = {"sha256": put.json()["sha256"], "size": MAX_FILE_BYTES}
        body = {"files": {**listing(files), **{f"r/{n:02}.bin": entry for n in range(30)}}}
        assert len(json.dumps(body)) < 4096  # a few KB of JSON names 300 MiB
        reads = _count_reads(env, monkeypatch)
        refused = problem(await c.post("/v1/plugins", json=body), 422, "plugin_too_large")
        assert "in all" in refused["detail"] and reads == []
        # A size the listing gets wrong is refused from the upload's record, unread too.
        lying = {"files": {**listing(files), "r/one.bin": {**entry, "size": 7}}}
        problem(await c.post("/v1/plugins", json=lying), 422, "invalid_plugin")
        assert reads == []


@pytest.mark.parametrize(
    "path", ["servers/__pycache__/notes.cpython-311.pyc", "servers/notes.pyc", ".git/config"]
)
async def test_a_listing_with_byte_code_or_version_control_is_refused(env: Env, path: str) -> None:
    """What the digest covers is what runs: a `.pyc` listed beside the reviewed source
    would run instead of it."""
    async with env.client(headers=AUTH) as c:
        files = {**plugin_files("1.0.0"), path: b"\0smuggled"}
        await upload(c, files)
        refused = problem(await c.post("/v1/plugins", json={"files": listing(files)}), 422,
                          "invalid_plugin")  # fmt: skip
        assert path in refused["detail"] and "never part of a plugin" in refused["detail"]


async def test_each_workspace_holds_at_most_its_quota_of_uploads(env: Env) -> None:
    env.host.registry.files.workspace_quota = 1 << 20
    first, second = b"a" * 600_000, b"b" * 600_000
    async with env.client(headers=AUTH) as c:
        assert (await c.post("/v1/plugin-files", content=first, headers=OCTETS)).status_code == 201
        # Content the workspace already holds costs nothing again.
        assert (await c.post("/v1/plugin-files", content=first, headers=OCTETS)).status_code == 201
        over = await c.post("/v1/plugin-files", content=second, headers=OCTETS)
        body = problem(over, 413, "workspace_quota_exceeded")
        assert (body["used"], body["quota"], body["size"]) == (600_000, 1 << 20, 600_000)
        assert "quota" in body["detail"]
        missing = await c.post("/v1/plugin-files/missing", json={"sha256": [_sha(second)]})
        assert missing.json()["missing"] == [_sha(second)]  # refused bytes are not held
        assert not await env.store.blobs.exists(_sha(second))  # nor stored
        # Another workspace has a quota of its own.
        user = (await c.post("/v1/users", json={"name": unique("u")})).json()
        theirs = {"Authorization": f"Bearer {user['token']}"}
        made = await c.post("/v1/workspaces", json={"name": unique("ws")}, headers=theirs)
        where = {"workspace_id": made.json()["workspace_id"]}
        put = await c.post("/v1/plugin-files", content=second, params=where,
                           headers={**theirs, **OCTETS})  # fmt: skip
        assert put.status_code == 201, put.text
    assert await env.store.workspace_usage(where["workspace_id"]) == 600_000


@pytest.mark.parametrize(
    ("text", "size"),
    [("5GiB", 5 << 30), ("500M", 500 << 20), ("1024", 1024), ("2 kib", 2048), ("0", 0)],
)
def test_quota_sizes_read_as_powers_of_1024(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_nua_serve_refuses_a_quota_that_is_not_a_size() -> None:
    result = CliRunner().invoke(app, ["serve", "--workspace-quota", "lots"])
    assert result.exit_code == 2
    assert "--workspace-quota must be a size" in result.output
    assert "--workspace-quota" in CliRunner().invoke(app, ["serve", "--help"]).output
