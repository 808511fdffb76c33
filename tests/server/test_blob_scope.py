"""Blobs are global for storage, scoped for access (issue 29, High 2): a hash names bytes
only for a workspace that uploaded them or sees a version listing them. Every route that
takes a hash, or serves stored bytes, is found in /openapi.json and walked by a viewer
removed from a workspace, trying its manifest, a file only a shell command wrote, an
artifact, a tool output and a diff from a workspace of his own."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import httpx

from opennua.protocol import action_id
from opennua.store import ArtifactRecord
from opennua.supervisor._workspace import Workspace
from tests._support.plugins import OCTETS, listing, plugin_files, problem

from ._harness import AUTH, Env
from ._world import add_user, unique

SHA256 = "^[0-9a-f]{64}$"
SKILL = b"---\nname: s\ndescription: reads a resource\n---\nRead loot.bin.\n"
#: Every route that takes a sha256 (by /openapi.json): how it is scoped is tested below.
HASH_ROUTES = {("POST", "/v1/plugin-files/missing"), ("POST", "/v1/plugins")}
#: Every route whose answer is stored bytes (or the log that names them), not JSON: each
#: reads its blob through an object of the caller's workspace, never by hash.
BYTE_ROUTES = {
    ("GET", "/v1/artifacts/{artifact_id}/content"),
    ("GET", "/v1/downloads/{link}"),
    ("GET", "/v1/sessions/{session_id}/file-changes/{change_id}/diff"),
    ("GET", "/v1/sessions/{session_id}/tool-calls/{tool_call_id}/output"),
    ("GET", "/v1/sessions/{session_id}/events"),
    ("POST", "/v1/agui/{deployment}"),
    ("POST", "/v1/agui/sessions/{session_id}"),
    ("POST", "/v1/a2a/{name}"),
}


def _takes_hash(node: Any, doc: dict[str, Any], seen: set[str]) -> bool:
    if isinstance(node, list):
        return any(_takes_hash(n, doc, seen) for n in node)
    if not isinstance(node, dict):
        return False
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            return False
        seen.add(name)
        return _takes_hash(doc["components"]["schemas"][name], doc, seen)
    return node.get("pattern") == SHA256 or any(_takes_hash(v, doc, seen) for v in node.values())


def _routes(doc: dict[str, Any]) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    hashes, stored = set(), set()
    for path, item in doc["paths"].items():
        for method, op in item.items():
            key = (method.upper(), path)
            taken = [op.get("parameters", []), op.get("requestBody", {})]
            if _takes_hash(taken, doc, set()):
                hashes.add(key)
            ok = op.get("responses", {}).get("200", {}).get("content", {})
            if any(media != "application/json" for media in ok):
                stored.add(key)
    return hashes, stored


async def _ok(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code < 300, r.text
    body: dict[str, Any] = r.json()
    return body


async def _workspace_a(env: Env, c: httpx.AsyncClient, tmp: Path) -> dict[str, str]:
    """A's session: a workspace commit (its manifest and a file only a shell command
    wrote), an artifact, a tool output and a diff by reference, each its own blob."""
    sid = (await _ok(await c.post("/v1/sessions", json={}, headers=AUTH)))["session_id"]
    sent = await _ok(
        await c.post(
            f"/v1/sessions/{sid}/messages",
            json={"content": [{"type": "text", "text": "hi"}]},
            headers=AUTH,
        )
    )
    turn, execution = sent["turn_id"], sent["execution_id"]
    (tmp / "ws").mkdir()
    (tmp / "ws" / "only-shell.txt").write_bytes(b"written by a shell command, nowhere else")
    workspace = Workspace(tmp / "ws", tmp / "index.json", env.store.blobs)
    manifest = await workspace.commit()
    assert manifest.sha256 is not None
    shell_file = hashlib.sha256(b"written by a shell command, nowhere else").hexdigest()
    artifact = await env.store.blobs.put(b"the quarterly report of A")
    output = await env.store.blobs.put(b"a tool output of A, stored by reference")
    diff = await env.store.blobs.put(b"--- /dev/null\n+++ b/secret.txt\n+A's secret\n")
    call_id, artifact_id = "call_blobscope", f"art_{unique('blobscope')}"

    def action(key: str, type_: str, data: dict[str, Any]) -> dict[str, Any]:
        return {
            "v": 1,
            "session_id": sid,
            "id": action_id(execution, key),
            "type": type_,
            "ts": "2027-01-15T08:00:00.000Z",
            "turn_id": turn,
            "data": data,
        }

    started = {
        "tool_call_id": call_id,
        "name": "shell",
        "title": "shell",
        "kind": "execute",
        "input": {},
    }
    published = {
        "artifact_id": artifact_id,
        "name": "report.md",
        "media_type": "text/plain",
        "size": artifact.size,
        "sha256": artifact.sha256,
    }
    committed = {
        "execution_id": execution,
        "manifest": manifest.sha256,
        "files": manifest.files,
        "bytes": manifest.bytes,
    }
    await env.store.append(
        sid,
        [
            action("started", "tool_call.started", started),
            action(
                "updated",
                "tool_call.updated",
                {
                    "tool_call_id": call_id,
                    "status": "completed",
                    "output_ref": f"blob:{output.sha256}",
                },
            ),
            action("committed", "workspace.committed", committed),
            action("artifact", "artifact.published", published),
            action(
                "file",
                "file.changed",
                {"path": "secret.txt", "change": "created", "diff_ref": f"sha256:{diff.sha256}"},
            ),
        ],
    )
    await env.store.put_artifact(
        ArtifactRecord(
            artifact_id=artifact_id,
            session_id=sid,
            name="report.md",
            media_type="text/plain",
            size=artifact.size,
            sha256=artifact.sha256,
            created_at=env.clock(),
        )
    )
    return {
        "session_id": sid,
        "artifact_id": artifact_id,
        "tool_call_id": call_id,
        "change_id": action_id(execution, "file"),
        "manifest": manifest.sha256,
        "shell file": shell_file,
        "artifact": artifact.sha256,
        "tool output": output.sha256,
        "diff": diff.sha256,
    }


async def test_a_removed_viewer_names_no_blob_of_the_workspace_from_one_of_his_own(
    env: Env, tmp_path: Path
) -> None:
    async with env.client() as c:
        a = (await _ok(await c.get("/v1/whoami", headers=AUTH)))["workspaces"][0]["workspace_id"]
        objects = await _workspace_a(env, c, tmp_path)
        blobs = {k: v for k, v in objects.items() if re.fullmatch(r"[0-9a-f]{64}", v)}
        viewer_id, token = await add_user(c, AUTH, a, "viewer")
        viewer = {"Authorization": f"Bearer {token}"}
        # While a viewer he reads the log (every hash is in it) and mints a download link.
        log = (await c.get(f"/v1/sessions/{objects['session_id']}/actions", headers=viewer)).text
        assert all(sha in log for name, sha in blobs.items() if name != "shell file")
        link = await _ok(
            await c.post(f"/v1/artifacts/{objects['artifact_id']}/links", headers=viewer)
        )
        removed = await c.delete(f"/v1/workspaces/{a}/members/{viewer_id}", headers=AUTH)
        assert removed.status_code == 204, removed.text
        env.authority.forget()
        b = (
            await _ok(await c.post("/v1/workspaces", json={"name": unique("ws")}, headers=viewer))
        )["workspace_id"]
        in_b = {"workspace_id": b}

        doc = (await c.get("/openapi.json", headers=AUTH)).json()
        hash_routes, byte_routes = _routes(doc)
        assert hash_routes == HASH_ROUTES, "a route takes a hash: scope it and walk it here"
        assert byte_routes == BYTE_ROUTES, "a route serves stored bytes: walk it here"

        # POST /v1/plugin-files/missing: nothing of A's counts as present in B.
        r = await c.post(
            "/v1/plugin-files/missing",
            params=in_b,
            headers=viewer,
            json={"sha256": sorted(blobs.values())},
        )
        assert sorted((await _ok(r))["missing"]) == sorted(blobs.values())
        # POST /v1/plugins: a plugin of his own listing each as a skill resource is refused,
        # as if the content did not exist at all; nothing is published.
        own = {
            **plugin_files("1.0.0", name=unique("thief")),
            "skills/s/SKILL.md": SKILL,
        }
        for data in own.values():
            put = await c.post(
                "/v1/plugin-files", content=data, headers={**viewer, **OCTETS}, params=in_b
            )
            assert put.status_code == 201, put.text
        for name, sha in blobs.items():
            loot = {"sha256": sha, "size": len(await env.store.blobs.read(sha))}
            body = {"files": {**listing(own), "skills/s/loot.bin": loot}}
            refused = await c.post("/v1/plugins", json=body, params=in_b, headers=viewer)
            assert problem(refused, 409, "files_missing")["detail"].startswith(
                "skills/s/loot.bin"
            ), name
        names = [
            p["name"]
            for p in (await c.get("/v1/plugins", params=in_b, headers=viewer)).json()["items"]
        ]
        assert names == ["default"]
        # The routes that serve stored bytes: through A's objects only, none of his now.
        paths = {
            ("GET", "/v1/artifacts/{artifact_id}/content"): (
                f"/v1/artifacts/{objects['artifact_id']}/content"
            ),
            ("GET", "/v1/downloads/{link}"): link["url"],
            ("GET", "/v1/sessions/{session_id}/file-changes/{change_id}/diff"): (
                f"/v1/sessions/{objects['session_id']}/file-changes/{objects['change_id']}/diff"
            ),
            ("GET", "/v1/sessions/{session_id}/tool-calls/{tool_call_id}/output"): (
                f"/v1/sessions/{objects['session_id']}/tool-calls/{objects['tool_call_id']}/output"
            ),
            ("GET", "/v1/sessions/{session_id}/events"): (
                f"/v1/sessions/{objects['session_id']}/events"
            ),
        }
        # The protocol streams: A's session named as his AG-UI thread, and A's deployment
        # by name, from B — nothing of A's is found, let alone streamed.
        sid = objects["session_id"]
        run = {"threadId": sid, "runId": "run-1", "messages": [], "state": {}, "tools": [],
               "context": [], "forwardedProps": {}}  # fmt: skip
        posts = {
            ("POST", "/v1/agui/{deployment}"): ("/v1/agui/default", run),
            ("POST", "/v1/agui/sessions/{session_id}"): (f"/v1/agui/sessions/{sid}", run),
            ("POST", "/v1/a2a/{name}"): (
                "/v1/a2a/default",
                {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"contextId": sid}},
            ),
        }
        assert set(paths) | set(posts) == BYTE_ROUTES
        for (method, _), url in paths.items():
            problem(await c.request(method, url, headers=viewer), 404, "not_found")
        for url, body in posts.values():
            refused = await c.post(url, json=body, params=in_b, headers=viewer)
            if url.startswith("/v1/a2a/"):  # A2A's own error shape: a JSON-RPC error
                assert "result" not in refused.json() and refused.json()["error"], refused.text
            else:
                problem(refused, 404, "not_found")
        # The same bytes uploaded by B itself are B's to publish: content-addressing holds.
        report = b"the quarterly report of A"
        put = await c.post(
            "/v1/plugin-files", content=report, headers={**viewer, **OCTETS}, params=in_b
        )
        assert (await _ok(put))["sha256"] == blobs["artifact"]
        body = {"files": {**listing(own), "skills/s/loot.bin": listing({"x": report})["x"]}}
        assert (await c.post("/v1/plugins", json=body, params=in_b, headers=viewer)).is_success


async def test_missing_answers_per_workspace(env: Env) -> None:
    """A's own upload counts as present in A, and in B as missing; the built-in plugin's
    files (a version everyone sees) are present everywhere."""
    async with env.client() as c:
        user = await _ok(await c.post("/v1/users", json={"name": unique("u")}, headers=AUTH))
        other = {"Authorization": f"Bearer {user['token']}"}
        b = (await _ok(await c.post("/v1/workspaces", json={"name": unique("ws")}, headers=other)))[
            "workspace_id"
        ]
        data = b"only uploaded in A"
        put = await c.post("/v1/plugin-files", content=data, headers={**AUTH, **OCTETS})
        sha = (await _ok(put))["sha256"]
        [builtin] = await env.store.list_plugin_versions("default")
        shared = builtin.files[0].sha256
        wanted = {"sha256": [sha, shared]}
        in_a = await _ok(await c.post("/v1/plugin-files/missing", json=wanted, headers=AUTH))
        in_b = await _ok(
            await c.post(
                "/v1/plugin-files/missing", json=wanted, headers=other, params={"workspace_id": b}
            )
        )
        assert (in_a["missing"], in_b["missing"]) == ([], [sha])
        assert json.dumps(in_b).count(shared) == 0
