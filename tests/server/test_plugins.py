"""The plugin registry and deployments over HTTP: publish, channels, deployments, refusals."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import httpx

from opennua.plugins import MAX_FILE_BYTES
from tests._support.plugins import OCTETS, listing, plugin_files, problem, publish, upload

from ._harness import AUTH, Env, park_for_input


async def test_publish_is_content_addressed_idempotent_and_immutable(env: Env) -> None:
    async with env.client(headers=AUTH) as c:
        v1 = plugin_files("1.0.0")
        r = await publish(c, v1)
        assert r.status_code == 201, r.text
        first = r.json()
        assert (first["name"], first["version"]) == ("helper", "1.0.0")
        assert first["digest"].startswith("sha256:")
        # Again: nothing to upload, the same version back, 200 not 201.
        assert await upload(c, v1) == []
        again = await c.post("/v1/plugins", json={"files": listing(v1)})
        assert again.status_code == 200 and again.json() == first
        # v2 changes one file: only that file's bytes travel.
        v2 = {**plugin_files("1.1.0"), "AGENTS.md": b"Be very helpful.\n"}
        uploaded = await upload(c, v2)
        assert sorted(uploaded) == sorted(
            hashlib.sha256(v2[p]).hexdigest() for p in (".claude-plugin/plugin.json", "AGENTS.md")
        )
        assert (await c.post("/v1/plugins", json={"files": listing(v2)})).status_code == 201
        # The same name and version with other content is refused, and changes nothing.
        changed = {**v1, "AGENTS.md": b"Something else.\n"}
        body = problem(await publish(c, changed), 409, "version_exists")
        assert "helper@1.0.0" in body["detail"]
        shown = await c.get("/v1/plugins/helper/versions/1.0.0")
        assert shown.json()["digest"] == first["digest"]
        overview = (await c.get("/v1/plugins/helper")).json()
        assert [v["version"] for v in overview["versions"]] == ["1.0.0", "1.1.0"]


async def test_a_bad_plugin_is_refused_naming_the_file_and_nothing_is_published(
    env: Env,
) -> None:
    async with env.client(headers=AUTH) as c:
        no_manifest = {"AGENTS.md": b"hi"}
        body = problem(await publish(c, no_manifest), 422, "invalid_plugin")
        assert ".claude-plugin/plugin.json" in body["detail"]
        bad_version = plugin_files("1.0")
        body = problem(await publish(c, bad_version), 422, "invalid_plugin")
        assert "'1.0' is not a semantic version" in body["detail"]
        assert (body["file"], body["line"]) == (".claude-plugin/plugin.json", 1)
        escaping = {**plugin_files("1.0.0"), "../outside": b"x"}
        body = problem(await publish(c, escaping), 422, "validation_error")
        assert body["errors"][0]["loc"][:2] == ["body", "files"]
        # A listing that names content never uploaded.
        files = plugin_files("1.0.0")
        await upload(c, files)
        ghost = {**listing(files), "skills/x.md": {"sha256": "0" * 64, "size": 3}}
        body = problem(await c.post("/v1/plugins", json={"files": ghost}), 409, "files_missing")
        assert "skills/x.md" in body["detail"]
        problem(await c.get("/v1/plugins/helper"), 404, "not_found")
        names = [p["name"] for p in (await c.get("/v1/plugins")).json()["items"]]
        assert names == ["default"]
        # Bytes that do not hash to their name are not stored.
        too_big = b"x" * (MAX_FILE_BYTES + 1)
        problem(await c.post("/v1/plugin-files", content=too_big, headers=OCTETS), 413,
                "payload_too_large")  # fmt: skip
        as_json = await c.post("/v1/plugin-files", json={"a": 1})
        problem(as_json, 415, "unsupported_media_type")


async def test_a_refusal_lists_every_problem_and_a_publish_its_warnings(env: Env) -> None:
    async with env.client(headers=AUTH) as c:
        files = plugin_files("1.0.0") | {
            ".mcp.json": b'{"cal": {"type": "websocket", "url": "wss://x"},\n "n": {"command": 3}}',
            "agents/a.md": b"no front matter\n",
            "output-styles/terse.md": b"Answer in one sentence.\n",
        }
        body = problem(await publish(c, files), 422, "invalid_plugin")
        assert (body["file"], body["line"]) == ("agents/a.md", 1)  # the first error
        assert [(p["severity"], p["file"], p["line"]) for p in body["problems"]] == [
            ("error", "agents/a.md", 1),
            ("error", ".mcp.json", 1),
            ("error", ".mcp.json", 2),
            ("ignored", "output-styles/", None),
        ]
        assert "type 'websocket' is not one of" in body["problems"][1]["message"]
        # Valid with warnings: published, and the warnings and servers come back.
        files = plugin_files("1.0.0") | {
            ".mcp.json": b'{"google calendar": {"type": "http", "url": ""}}',
        }
        r = await publish(c, files)
        assert r.status_code == 201, r.text
        doc = r.json()
        assert doc["servers"] == [
            {"name": "google calendar", "prefix": "google_calendar", "transport": "http",
             "configured": False}
        ]  # fmt: skip
        (warning,) = doc["problems"]
        assert warning["severity"] == "warning" and "has no URL" in warning["message"]
        shown = (await c.get("/v1/plugins/helper/versions/1.0.0")).json()
        assert (shown["problems"], shown["servers"]) == (doc["problems"], doc["servers"])


async def test_a_plugin_without_version_or_manifest_publishes(env: Env) -> None:
    async with env.client(headers=AUTH) as c:
        manifest = {"name": "helper", "description": "helps"}
        files = plugin_files("1.0.0") | {
            ".claude-plugin/plugin.json": json.dumps(manifest).encode()
        }
        r = await publish(c, files)
        assert r.status_code == 201, r.text
        derived = r.json()
        assert derived["version"] == "0.0.0+" + derived["digest"].removeprefix("sha256:")[:12]
        # The same bytes again: the same version (idempotent); a version given names it.
        assert (await publish(c, files)).json()["version"] == derived["version"]
        body = {"files": listing(files), "version": "1.0.0"}
        named = await c.post("/v1/plugins", json=body)
        assert named.status_code == 201 and named.json()["version"] == "1.0.0"
        assert named.json()["digest"] == derived["digest"]  # the digest stays the identity
        # Deployable like any version: the registry reads it back under that version.
        spec = {"plugin": "helper", "version": "1.0.0", "model": "scripted:demo"}
        assert (await c.put("/v1/deployments/helper", json=spec)).status_code == 200
        # A version the manifest contradicts is refused.
        stated = plugin_files("2.0.0")
        await upload(c, stated)
        clash = await c.post("/v1/plugins", json={"files": listing(stated), "version": "3.0.0"})
        assert "version given is 3.0.0" in problem(clash, 422, "invalid_plugin")["detail"]
        # No manifest at all: the publisher names it (nua plugin publish sends the
        # directory's name); without a name it is refused, saying so.
        bare = {"skills/hi/SKILL.md": b"---\nname: hi\ndescription: Say hi.\n---\nHi.\n"}
        await upload(c, bare)
        nameless = await c.post("/v1/plugins", json={"files": listing(bare)})
        assert "give the plugin's name" in problem(nameless, 422, "invalid_plugin")["detail"]
        r = await c.post("/v1/plugins", json={"files": listing(bare), "name": "greeter"})
        assert r.status_code == 201, r.text
        assert r.json()["name"] == "greeter" and r.json()["version"].startswith("0.0.0+")
        (warning,) = r.json()["problems"]
        assert "after its directory" in warning["message"]


async def test_release_rollback_and_their_history(env: Env) -> None:
    async with env.client(headers=AUTH) as c:
        for v in ("1.0.0", "2.0.0"):
            assert (await publish(c, plugin_files(v))).status_code == 201
        base = "/v1/plugins/helper/channels/stable"
        problem(await c.post(f"{base}/rollback"), 409, "no_earlier_release")
        problem(await c.post(f"{base}/release", json={"version": "9.0.0"}), 404, "not_found")
        assert (await c.post(f"{base}/release", json={"version": "1.0.0"})).status_code == 200
        assert (await c.post(f"{base}/release", json={"version": "2.0.0"})).status_code == 200
        moved = (await c.post(f"{base}/rollback")).json()
        assert (moved["kind"], moved["version"]) == ("rollback", "1.0.0")
        overview = (await c.get("/v1/plugins/helper")).json()
        assert overview["channels"] == {"stable": "1.0.0"}
        assert [(m["kind"], m["version"]) for m in overview["history"]] == [
            ("release", "1.0.0"),
            ("release", "2.0.0"),
            ("rollback", "1.0.0"),
        ]
        listed = (await c.get("/v1/plugins")).json()["items"]
        assert {"name": "helper", "latest": "2.0.0", "channels": {"stable": "1.0.0"}} in listed


async def test_a_deployment_is_validated_when_saved_and_has_its_own_digest(env: Env) -> None:
    async with env.client(headers=AUTH) as c:
        await publish(c, plugin_files("1.0.0"))
        await c.post("/v1/plugins/helper/channels/stable/release", json={"version": "1.0.0"})
        spec = {
            "plugin": "helper",
            "channel": "stable",
            "model": "openai:gpt-4o",
            "tools": {"notes": {"url": "https://notes.example/mcp"}},
            "credentials": [{"server": "notes", "secret": "notes-token"}],
            "limits": {"max_steps": 10, "max_cost_usd": 0.5, "deadline_seconds": 600},
        }
        # A reference to a secret the workspace does not have is refused, with its name.
        missing = problem(await c.put("/v1/deployments/support", json=spec), 422, "secret_missing")
        assert missing["secret"] == "notes-token" and "notes-token" in missing["detail"]
        workspace = (await c.get("/v1/whoami")).json()["workspaces"][0]["workspace_id"]
        await env.app.state.context.secrets.put(workspace, "notes-token", "the-value")
        r = await c.put("/v1/deployments/support", json=spec)
        assert r.status_code == 200, r.text
        first = r.json()
        assert first["digest"].startswith("sha256:") and first["spec"]["credentials"] == [
            {"server": "notes", "secret": "notes-token", "header": "Authorization",
             "prefix": "Bearer "}
        ]  # fmt: skip
        assert "the-value" not in r.text
        # Saving the same again is the same digest; a change is a new one.
        assert (await c.put("/v1/deployments/support", json=spec)).json()["digest"] == first[
            "digest"
        ]
        changed = await c.put(
            "/v1/deployments/support", json={**spec, "model": "openai:gpt-4o-mini"}
        )
        assert changed.json()["digest"] != first["digest"]
        assert (await c.get("/v1/deployments/support")).json() == changed.json()
        names = [d["name"] for d in (await c.get("/v1/deployments")).json()["items"]]
        assert names == ["default", "support"]

        refusals = [
            ({**spec, "plugin": "nope"}, 409, "deployment_unresolvable", "nope"),
            ({**spec, "channel": "beta"}, 409, "deployment_unresolvable", "helper:beta"),
            ({**spec, "version": "1.0.0"}, 422, "invalid_deployment", "not both"),
            ({**spec, "tools": {"mail": {}}}, 422, "invalid_deployment", "mail"),
            # A cost cap on a model nobody knows the price of failed the turn after its
            # first response; it is refused here, saying why (issue 35).
            (
                {**spec, "model": "openai:my-local-llama"},
                422,
                "invalid_deployment",
                "no price is known for openai:my-local-llama",
            ),
            (
                {**spec, "credentials": [{"server": "mail", "secret": "notes-token"}]},
                422,
                "invalid_deployment",
                "mail",
            ),
        ]
        for body, status, code, needle in refusals:
            got = problem(await c.put("/v1/deployments/other", json=body), status, code)
            assert needle in got["detail"], got
        # Without a cost cap, the same model is fine.
        uncapped = {**spec, "model": "openai:my-local-llama", "limits": {"max_steps": 10}}
        assert (await c.put("/v1/deployments/local", json=uncapped)).status_code == 200
        bad_limits = {**spec, "limits": {"max_steps": 0}}
        problem(await c.put("/v1/deployments/other", json=bad_limits), 422, "validation_error")
        secret = {**spec, "credentials": [{"server": "notes", "secret": "sk-live sk"}]}
        problem(await c.put("/v1/deployments/other", json=secret), 422, "validation_error")
        problem(await c.get("/v1/deployments/other"), 404, "not_found")


async def test_a_session_is_bound_to_the_snapshot_its_deployment_resolved_to(env: Env) -> None:
    async with env.client(headers=AUTH) as c:
        for v in ("1.0.0", "2.0.0"):
            await publish(c, plugin_files(v))
        await c.post("/v1/plugins/helper/channels/stable/release", json={"version": "1.0.0"})
        spec = {"plugin": "helper", "model": "test:model"}
        deployment = (await c.put("/v1/deployments/support", json=spec)).json()
        first = (await c.post("/v1/sessions", json={"deployment": "support"})).json()
        await c.post("/v1/plugins/helper/channels/stable/release", json={"version": "2.0.0"})
        second = (await c.post("/v1/sessions", json={"deployment": "support"})).json()
        builtin = (await c.post("/v1/sessions", json={})).json()

        async def state(created: dict[str, Any]) -> dict[str, Any]:
            got: dict[str, Any] = (await c.get(f"/v1/sessions/{created['session_id']}")).json()
            return got["state"]

        one, two, default = await state(first), await state(second), await state(builtin)
        assert one["plugin"]["version"] == "1.0.0" and two["plugin"]["version"] == "2.0.0"
        assert one["deployment"] == "support" and one["model"] == "test:model"
        assert one["deployment_digest"] == deployment["digest"]
        assert one["snapshot_digest"] != two["snapshot_digest"]
        assert default["plugin"]["name"] == "default"
        assert default["deployment"] == "default"
        # A turn pins the session's snapshot, whatever the channel says now.
        sent = await c.post(f"/v1/sessions/{first['session_id']}/messages", json={"content": "hi"})
        assert sent.status_code == 202, sent.text
        (execution,) = await env.store.list_executions(first["session_id"])
        assert execution.snapshot_digest == one["snapshot_digest"]
        assert execution.input == [{"type": "text", "text": "hi"}]

        unknown = await c.post("/v1/sessions", json={"deployment": "nope"})
        assert problem(unknown, 404, "not_found")["detail"] == "no deployment named 'nope'"


async def test_the_session_list_carries_status_requests_and_snapshot_and_filters(
    env: Env,
) -> None:
    async with env.client(headers=AUTH) as c:
        await publish(c, plugin_files("1.0.0"))
        await c.post("/v1/plugins/helper/channels/stable/release", json={"version": "1.0.0"})
        await c.put("/v1/deployments/support", json={"plugin": "helper", "model": "test:m"})
        idle = (await c.post("/v1/sessions", json={"deployment": "support"})).json()["session_id"]
        env.clock.advance(1)
        parked = (await c.post("/v1/sessions", json={"deployment": "support"})).json()["session_id"]
        env.clock.advance(1)
        builtin = (await c.post("/v1/sessions", json={})).json()["session_id"]
        env.clock.advance(1)
        sent = (await c.post(f"/v1/sessions/{parked}/messages", json={"content": "go"})).json()
        await park_for_input(env, parked, sent["execution_id"], sent["turn_id"])

        items = (await c.get("/v1/sessions")).json()["items"]
        by_id = {i["session_id"]: i for i in items}
        assert [i["session_id"] for i in items] == [builtin, parked, idle]
        assert by_id[parked]["status"] == "requires_action"
        assert by_id[parked]["open_input_requests"] == 1
        assert by_id[parked]["last_activity_at"] > by_id[parked]["created_at"]
        assert by_id[idle]["status"] == "idle" and by_id[idle]["open_input_requests"] == 0
        assert by_id[idle]["plugin"] == "helper@1.0.0" and by_id[idle]["deployment"] == "support"
        assert by_id[builtin]["deployment"] == "default"
        state = (await c.get(f"/v1/sessions/{idle}")).json()["state"]
        assert by_id[idle]["snapshot_digest"] == state["snapshot_digest"]

        support = (await c.get("/v1/sessions", params={"deployment": "support"})).json()
        assert [i["session_id"] for i in support["items"]] == [parked, idle]
        waiting = (await c.get("/v1/sessions", params={"status": "requires_action"})).json()
        assert [i["session_id"] for i in waiting["items"]] == [parked]
        idle_ones = (await c.get("/v1/sessions", params={"status": "idle"})).json()
        assert [i["session_id"] for i in idle_ones["items"]] == [builtin, idle]
        first = (await c.get("/v1/sessions", params={"deployment": "support", "limit": 1})).json()
        cursor = first["next_cursor"]
        rest = await c.get("/v1/sessions", params={"deployment": "support", "cursor": cursor})
        assert [i["session_id"] for i in first["items"] + rest.json()["items"]] == [parked, idle]
        bad = await c.get("/v1/sessions", params={"status": "sleeping"})
        problem(bad, 422, "validation_error")


async def test_the_registry_belongs_to_workspaces_and_private_plugins_to_their_publisher(
    env: Env,
) -> None:
    async with env.client(headers=AUTH) as owner:
        me = (await owner.get("/v1/whoami")).json()
        a = me["workspaces"][0]["workspace_id"]
        b = (await owner.post("/v1/workspaces", json={"name": "team-b"})).json()["workspace_id"]
        # An agent principal the owner creates in A, an admin there (it may deploy).
        bot = (
            await owner.post(
                f"/v1/workspaces/{a}/agent-principals", json={"name": "bot", "role": "admin"}
            )
        ).json()
        bot_token = (
            await owner.post("/v1/tokens", json={"principal_id": bot["principal_id"]})
        ).json()["token"]

        private = plugin_files("1.0.0", name="secret-helper")
        await upload(owner, private)
        body = {"files": listing(private), "visibility": "private"}
        made = await owner.post("/v1/plugins", json=body)
        assert made.status_code == 201 and made.json()["visibility"] == "private", made.text
        assert made.json()["workspace_id"] == a
        shared = plugin_files("1.0.0", name="team-helper")
        assert (await publish(owner, shared)).status_code == 201
        for name in ("secret-helper", "team-helper"):
            released = await owner.post(
                f"/v1/plugins/{name}/channels/stable/release", json={"version": "1.0.0"}
            )
            assert released.status_code == 200, released.text
        spec = {"plugin": "secret-helper", "model": "scripted:demo"}
        assert (await owner.put("/v1/deployments/mine", json=spec)).status_code == 200

        # The same name from another workspace is taken; a session there cannot use A's.
        problem(await publish_in(owner, b, shared), 409, "name_taken")
        elsewhere = await owner.post(
            "/v1/sessions", params={"workspace_id": b}, json={"deployment": "mine"}
        )
        assert problem(elsewhere, 404, "not_found")
        listed_b = (await owner.get("/v1/plugins", params={"workspace_id": b})).json()["items"]
        assert {p["name"] for p in listed_b} == {"default"}  # only the server's own

    async with env.client(headers={"Authorization": f"Bearer {bot_token}"}) as agent:
        listed = {p["name"] for p in (await agent.get("/v1/plugins")).json()["items"]}
        assert listed == {"default", "team-helper"}  # not the owner's private plugin
        problem(await agent.get("/v1/plugins/secret-helper"), 404, "not_found")
        problem(await agent.get("/v1/plugins/secret-helper/versions/1.0.0"), 404, "not_found")
        # It cannot deploy it, nor start a session through the owner's deployment of it.
        unresolvable = await agent.put("/v1/deployments/its-own", json=spec)
        assert "does not exist" in problem(unresolvable, 409, "deployment_unresolvable")["detail"]
        through = await agent.post("/v1/sessions", json={"deployment": "mine"})
        assert "not yours to see" in problem(through, 409, "deployment_unresolvable")["detail"]
        # The built-in plugin is everyone's to read and nobody's to move.
        assert (await agent.get("/v1/plugins/default")).status_code == 200

    async with env.client(headers=AUTH) as owner:
        problem(await owner.post("/v1/plugins/default/channels/stable/rollback"), 403, "forbidden")
        mine = await owner.post("/v1/sessions", json={"deployment": "mine"})
        assert mine.status_code == 201, mine.text


async def publish_in(
    client: httpx.AsyncClient, workspace_id: str, files: dict[str, bytes]
) -> httpx.Response:
    where = {"workspace_id": workspace_id}
    by_sha = {hashlib.sha256(d).hexdigest(): d for d in files.values()}
    r = await client.post("/v1/plugin-files/missing", json={"sha256": sorted(by_sha)}, params=where)
    for sha in r.json()["missing"]:
        await client.post("/v1/plugin-files", content=by_sha[sha], headers=OCTETS, params=where)
    return await client.post("/v1/plugins", json={"files": listing(files)}, params=where)


async def test_a_deployment_may_run_a_persons_turns_as_its_own_principal(env: Env) -> None:
    async with env.client(headers=AUTH) as owner:
        me = (await owner.get("/v1/whoami")).json()
        a = me["workspaces"][0]["workspace_id"]
        bot = (
            await owner.post(f"/v1/workspaces/{a}/agent-principals", json={"name": "runner"})
        ).json()["principal_id"]
        alice = (await owner.post("/v1/users", json={"name": "alice"})).json()
        joined = await owner.put(
            f"/v1/workspaces/{a}/members/{alice['principal_id']}", json={"role": "member"}
        )
        assert joined.status_code == 200, joined.text
        spec = {
            "plugin": "default", "model": "scripted:demo", "principal_id": bot,
            "run_as": "principal",
        }  # fmt: skip
        assert (await owner.put("/v1/deployments/as-bot", json=spec)).status_code == 200
    async with env.client(headers={"Authorization": f"Bearer {alice['token']}"}) as client:
        sid = (await client.post("/v1/sessions", json={"deployment": "as-bot"})).json()[
            "session_id"
        ]
        sent = await client.post(
            f"/v1/sessions/{sid}/messages", json={"content": "hi", "client_id": "cli_alice"}
        )
        assert sent.status_code == 202, sent.text
        execution = (await client.get(f"/v1/executions/{sent.json()['execution_id']}")).json()
    # Whose rights and bill: the deployment's principal; alice only caused it.
    assert execution["principal_id"] == bot
    assert execution["trigger"]["principal_id"] == alice["principal_id"]
    facts = await env.store.grant_facts(execution["execution_id"])
    assert facts is not None
    grant = facts[0]
    assert (grant.principal_id, grant.token_id) == (bot, None)
    # So revoking alice's token does not stop it; disabling the principal does.
    token_id = alice["token"].split(".")[1]  # nua.tok_<id>.<secret>
    async with env.client(headers={"Authorization": f"Bearer {alice['token']}"}) as client:
        assert (await client.delete(f"/v1/tokens/{token_id}")).status_code == 200
    async with env.client(headers=AUTH) as owner:
        env.authority.forget()
        assert await env.authority.grant_problem(execution["execution_id"]) is None
        assert (await owner.post(f"/v1/agent-principals/{bot}/disable")).status_code == 200
    env.authority.forget()
    assert await env.authority.grant_problem(execution["execution_id"]) == "principal_disabled"


async def test_a_turn_runs_only_as_a_principal_who_may_read_the_sessions_plugin(env: Env) -> None:
    """One rule for every trigger (issue 29): whom a turn runs as must be able to read the
    session's plugin version, judged when the turn's grant is made. A person's turn on a
    deployment that runs as its agent principal may not run the person's private plugin
    that principal cannot see; nor may another member's turn."""
    async with env.client(headers=AUTH) as owner:
        me = (await owner.get("/v1/whoami")).json()
        a = me["workspaces"][0]["workspace_id"]
        bot = (
            await owner.post(f"/v1/workspaces/{a}/agent-principals", json={"name": "runner"})
        ).json()["principal_id"]
        alice = (await owner.post("/v1/users", json={"name": "alice"})).json()
        await owner.put(
            f"/v1/workspaces/{a}/members/{alice['principal_id']}", json={"role": "member"}
        )
        private = plugin_files("1.0.0", name="my-private")
        await upload(owner, private)
        made = await owner.post(
            "/v1/plugins", json={"files": listing(private), "visibility": "private"}
        )
        assert made.status_code == 201, made.text
        released = await owner.post(
            "/v1/plugins/my-private/channels/stable/release", json={"version": "1.0.0"}
        )
        assert released.status_code == 200, released.text
        as_bot = {
            "plugin": "my-private", "model": "scripted:demo", "principal_id": bot,
            "run_as": "principal",
        }  # fmt: skip
        assert (await owner.put("/v1/deployments/private-as-bot", json=as_bot)).status_code == 200
        as_me = {"plugin": "my-private", "model": "scripted:demo"}
        assert (await owner.put("/v1/deployments/private-as-me", json=as_me)).status_code == 200

        # The owner sees the plugin, so the session binds it; the bot may not run it.
        sid = (await owner.post("/v1/sessions", json={"deployment": "private-as-bot"})).json()[
            "session_id"
        ]
        refused = await owner.post(f"/v1/sessions/{sid}/messages", json={"content": "hi"})
        assert "may not read" in problem(refused, 409, "plugin_not_visible")["detail"]
        assert await env.store.list_executions(sid) == []

        # Run as the caller: the owner's own turn runs; alice's in the same session not.
        mine = (await owner.post("/v1/sessions", json={"deployment": "private-as-me"})).json()[
            "session_id"
        ]
        ran = await owner.post(f"/v1/sessions/{mine}/messages", json={"content": "hi"})
        assert ran.status_code == 202, ran.text
        await owner.post(f"/v1/sessions/{mine}/cancel", json={})
    async with env.client(headers={"Authorization": f"Bearer {alice['token']}"}) as client:
        theirs = await client.post(
            f"/v1/sessions/{mine}/messages", json={"content": "hi", "if_busy": "enqueue"}
        )
        problem(theirs, 409, "plugin_not_visible")
