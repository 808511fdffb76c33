"""The read routes the web console adds (docs/web.md, "The console"): usage over time that
sums to the totals, the session list's new filters, the audit's filters, a workspace's
people, a hook's deliveries and what a plugin version contains."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from opennua.server._usage import KINDS as TOKEN_KINDS
from opennua.store import AuditRecord
from tests._support.plugins import plugin_files, problem, publish

from ._harness import AUTH, Env, park_for_input

KINDS = (*TOKEN_KINDS, "responses")


def _usage(sid: str, turn_id: str, n: int, stamp: str, model: str, **tokens: int) -> dict[str, Any]:
    provider, _, name = model.partition(":")
    return {
        "v": 1, "session_id": sid, "seq": None, "id": f"act_usage_{sid}_{n}",
        "type": "usage.recorded", "ts": stamp, "turn_id": turn_id, "run_id": None,
        "client_id": None, "intent_id": None,
        "data": {"provider": provider, "model": name, **tokens},
    }  # fmt: skip


async def test_usage_over_time_sums_to_the_totals_per_deployment_and_model(env: Env) -> None:
    start = env.clock()  # 2027-01-15T08:00:00Z
    async with env.client(headers=AUTH) as c:
        await c.put("/v1/deployments/support", json={"plugin": "default", "model": "test:m"})
        rows = []
        for n, deployment in enumerate(("default", "support")):
            sid = (await c.post("/v1/sessions", json={"deployment": deployment})).json()[
                "session_id"
            ]
            sent = await c.post(f"/v1/sessions/{sid}/messages", json={"content": "go"})
            turn = sent.json()["turn_id"]
            rows += [
                _usage(sid, turn, 1, "2027-01-15T08:10:00.000Z", "openai:gpt-4o",
                       input_tokens=1000 * (n + 1), output_tokens=10, cache_read_input_tokens=5),
                _usage(sid, turn, 2, "2027-01-15T10:30:00.000Z", "scripted:demo",
                       input_tokens=7, reasoning_output_tokens=3),
                _usage(sid, turn, 3, "2027-01-15T11:59:59.000Z", "nowhere:unknown",
                       input_tokens=9),
            ]  # fmt: skip
            await env.store.append(sid, rows[-3:])
        env.clock.advance(4 * 3600)
        for by in ("deployment", "model", "principal"):
            params = {"by": by, "since": start, "bucket": 3600}
            got = (await c.get("/v1/usage/series", params=params)).json()
            totals = (await c.get("/v1/usage", params={"by": by, "since": start})).json()
            assert len(got["buckets"]) == 4 and got["buckets"][0] == "2027-01-15T08:00:00.000Z"
            summed = {
                s["key"]: {k: sum(s[k]) for k in KINDS}
                | {"cost_usd": sum(Decimal(x) for x in s["cost_usd"])}
                for s in got["series"]
            }
            expected = {
                i["key"]: {k: i[k] for k in KINDS} | {"cost_usd": Decimal(i["cost_usd"])}
                for i in totals["items"]
            }
            assert summed == expected, by
        per_deployment = {s["key"]: s for s in got_series(await c.get(
            "/v1/usage/series", params={"by": "deployment", "since": start, "bucket": 3600}
        ))}  # fmt: skip
        assert per_deployment["support"]["input_tokens"] == [2000, 0, 7, 9]
        assert Decimal(per_deployment["support"]["cost_usd"][0]) > 0
        assert per_deployment["support"]["cost_usd"][1:] == ["0", "0", "0"]
        # A period too long for its bucket gets wider ones; an empty period has none.
        wide = (await c.get("/v1/usage/series", params={"since": 0, "bucket": 60})).json()
        assert len(wide["buckets"]) <= 1000 and wide["bucket_seconds"] > 60
        assert sum(sum(s["input_tokens"]) for s in wide["series"]) == 2 * (1000 + 7 + 9) + 1000
        backwards = {"since": start + 10, "until": start}
        empty = (await c.get("/v1/usage/series", params=backwards)).json()
        assert empty["buckets"] == [] and empty["series"] == []


def got_series(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    series: list[dict[str, Any]] = response.json()["series"]
    return series


async def test_the_session_list_filters_by_principal_needs_input_time_and_title(
    env: Env,
) -> None:
    async with env.client(headers=AUTH) as c:
        me = (await c.get("/v1/whoami")).json()["principal_id"]
        first = (await c.post("/v1/sessions", json={"title": "Monthly report"})).json()
        env.clock.advance(10)
        second = (await c.post("/v1/sessions", json={"title": "notes"})).json()
        sent = (
            await c.post(f"/v1/sessions/{second['session_id']}/messages", json={"content": "x"})
        ).json()
        await park_for_input(env, second["session_id"], sent["execution_id"], sent["turn_id"])

        async def ids(**params: Any) -> list[str]:
            r = await c.get("/v1/sessions", params=params)
            assert r.status_code == 200, r.text
            return [i["session_id"] for i in r.json()["items"]]

        assert await ids(q="REPORT") == [first["session_id"]]
        assert await ids(needs_input="true") == [second["session_id"]]
        assert await ids(needs_input="false") == [first["session_id"]]
        assert await ids(principal_id=me) == [second["session_id"], first["session_id"]]
        assert await ids(principal_id="prn_nobody") == []
        assert await ids(until=env.clock() - 5) == [first["session_id"]]
        assert await ids(since=env.clock() - 5) == [second["session_id"]]
        items = (await c.get("/v1/sessions")).json()["items"]
        assert {i["principal_id"] for i in items} == {me}
        problem(await c.get("/v1/sessions", params={"q": ""}), 422, "validation_error")


async def test_the_audit_is_filtered_on_the_server(env: Env) -> None:
    async with env.client(headers=AUTH) as c:
        workspace = (await c.get("/v1/whoami")).json()["workspaces"][0]["workspace_id"]
        now = env.clock()
        await env.store.append_audit(
            [
                AuditRecord(
                    audit_id=f"aud_{i}", at=now - 100 + i, server="notes",
                    tool="search" if i % 2 else "fetch", outcome="ok" if i < 3 else "refused",
                    code=None if i < 3 else "egress_denied", latency_ms=2.0,
                    workspace_id=workspace, principal_id="prn_x", credential="notes-token",
                )
                for i in range(5)
            ]
            + [
                AuditRecord(
                    audit_id="aud_5", at=now - 50, server="egress", host="10.0.0.1", port=22,
                    outcome="refused", code="egress_denied", latency_ms=0.2,
                    workspace_id=workspace, principal_id="prn_x", bytes_up=0, bytes_down=0,
                )
            ]
        )  # fmt: skip

        async def ids(**params: Any) -> list[str]:
            r = await c.get("/v1/audit", params=params)
            assert r.status_code == 200, r.text
            return [i["audit_id"] for i in r.json()["items"]]

        assert await ids(outcome="refused") == ["aud_5", "aud_4", "aud_3"]
        assert await ids(tool="search", outcome="ok") == ["aud_1"]
        assert await ids(since=now - 99, until=now - 97) == ["aud_2", "aud_1"]
        assert await ids(principal_id="prn_x", server="notes", limit=1) == ["aud_4"]
        assert await ids(server="elsewhere") == []
        # The egress proxy's connections: their own kind, host, port and bytes.
        assert await ids(kind="egress") == ["aud_5"]
        assert await ids(kind="tool_call", outcome="refused") == ["aud_4", "aud_3"]
        [egress] = (await c.get("/v1/audit", params={"kind": "egress"})).json()["items"]
        assert egress["kind"] == "egress" and (egress["host"], egress["port"]) == ("10.0.0.1", 22)
        assert (egress["bytes_up"], egress["bytes_down"], egress["code"]) == (0, 0, "egress_denied")
        assert (await c.get("/v1/audit", params={"kind": "other"})).status_code == 422


async def test_people_deliveries_and_a_versions_contents(env: Env) -> None:
    async with env.client(headers=AUTH) as c:
        me = (await c.get("/v1/whoami")).json()
        workspace = me["workspaces"][0]["workspace_id"]
        agent = await c.post(
            f"/v1/workspaces/{workspace}/agent-principals", json={"name": "bot", "role": "viewer"}
        )
        assert agent.status_code == 201
        people = (await c.get(f"/v1/workspaces/{workspace}/people")).json()["items"]
        assert [(p["name"], p["kind"], p["role"]) for p in people] == [
            (me["name"], "user", "owner"),
            ("bot", "agent", "viewer"),
        ]
        assert people[1]["permissions"] == ["read"] and people[1]["disabled"] is False
        assert "created_by" not in people[1]  # may name another workspace's principal

        hook = (await c.post("/v1/hooks", json={"name": "h", "prompt": "p"})).json()
        assert (await c.get(f"/v1/hooks/{hook['hook_id']}/deliveries")).json() == {
            "deliveries": [],
            "refusals": [],
        }
        problem(await c.get("/v1/hooks/hok_nope/deliveries"), 404, "not_found")

        review = {"url": "https://agents.example.com/v1/a2a/review", "description": "reviews"}
        files = plugin_files("1.0.0") | {
            "commands/hello.md": b"---\ndescription: hi\n---\nSay hi\n",
            "output-styles/terse.md": b"Answer in one sentence.\n",
            ".a2a.json": json.dumps({"agents": {"Review Bot": review}}).encode(),
            "opennua.toml": b'[access]\negress = ["agents.example.com"]\n',
        }
        assert (await publish(c, files)).status_code == 201
        got = await c.get("/v1/plugins/helper/versions/1.0.0/contents")
        assert got.status_code == 200, got.text
        doc = got.json()
        assert doc["name"] == "helper" and doc["digest"].startswith("sha256:")
        assert doc["warnings"] == [
            "output-styles/: ignored: output styles shape Claude Code's terminal, which "
            "opennua does not have"
        ]
        # The A2A agents beside the MCP servers: one namespace, one list to read.
        assert [(s["name"], s["kind"], s["url"]) for s in doc["servers"]] == [
            ("notes", "stdio", None),
            ("Review Bot", "a2a", review["url"]),
        ]
        assert doc["servers"][1]["description"] == "reviews"
        version = (await c.get("/v1/plugins/helper/versions/1.0.0")).json()
        assert version["publisher_id"] == me["principal_id"]
        problem(await c.get("/v1/plugins/helper/versions/9.9.9/contents"), 404, "not_found")
